#pragma once
// Small helpers over SQLite's C API shared by the stores (job_store, history_store).
#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "util/result.h"

namespace gpulane::store {

/// A prepared statement, finalised on scope exit; or a kept one (a store's cache of statements),
/// reset and its bindings cleared on scope exit instead.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  explicit Stmt(sqlite3_stmt* kept) : stmt_(kept), rc_(kept ? SQLITE_OK : SQLITE_ERROR), kept_(true) {}
  ~Stmt() {
    if (!kept_) sqlite3_finalize(stmt_);
    else if (stmt_) Reset();
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return stmt_; }
  void Bind(int i, std::int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void Bind(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  void Bind(int i, const std::string& v) { sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT); }
  void BindNull(int i) { sqlite3_bind_null(stmt_, i); }
  template <typename T>
  void BindOpt(int i, const std::optional<T>& v) {
    if (v) Bind(i, static_cast<std::conditional_t<std::is_floating_point_v<T>, double, std::int64_t>>(*v));
    else BindNull(i);
  }
  int Step() { return sqlite3_step(stmt_); }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
  bool kept_ = false;
};

/// Column `i` of the current row: NULL as nullopt.
inline std::optional<double> OptDouble(sqlite3_stmt* s, int i) {
  if (sqlite3_column_type(s, i) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_double(s, i);
}
inline std::optional<std::int64_t> OptInt(sqlite3_stmt* s, int i) {
  if (sqlite3_column_type(s, i) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_int64(s, i);
}
/// Column `i` as text ("" for NULL).
inline std::string Text(sqlite3_stmt* s, int i) {
  const unsigned char* t = sqlite3_column_text(s, i);
  return t ? reinterpret_cast<const char*>(t) : "";
}

/// A failed statement of `db` as kIo: "<what>: <SQLite's message>".
inline Error DbError(sqlite3* db, const std::string& what) {
  return MakeError(ErrorKind::kIo, what + ": " + sqlite3_errmsg(db));
}

}  // namespace gpulane::store

#pragma once
// A second connection to a job store's database that takes its write lock and keeps it until
// Release (BEGIN EXCLUSIVE, as an admin's sqlite3 shell or a backup tool may): the store's writes
// fail meanwhile (after its busy timeout), its reads go on (WAL). Header-only, for tests.
#include <sqlite3.h>

#include <string>

#include <gtest/gtest.h>

namespace gpulane::test {

class SqliteLocker {
 public:
  /// `busy_timeout_ms`: how long to wait for a write already under way (a running daemon's) first.
  explicit SqliteLocker(const std::string& path, int busy_timeout_ms = 0) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    if (busy_timeout_ms > 0) sqlite3_busy_timeout(db_, busy_timeout_ms);
    EXPECT_EQ(sqlite3_exec(db_, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db_);
  }
  ~SqliteLocker() { Release(); }
  SqliteLocker(const SqliteLocker&) = delete;
  SqliteLocker& operator=(const SqliteLocker&) = delete;
  void Release() {
    if (!db_) return;
    EXPECT_EQ(sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db_);
    db_ = nullptr;
  }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace gpulane::test

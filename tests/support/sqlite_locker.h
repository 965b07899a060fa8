#pragma once
// A second connection to a job store's database that takes its write lock and keeps it until
// Release (BEGIN EXCLUSIVE, as an admin's sqlite3 shell or a backup tool may): the store's writes
// fail meanwhile (after its busy timeout), its reads go on (WAL). Header-only, for unit tests.
#include <sqlite3.h>

#include <string>

#include <gtest/gtest.h>

namespace gpulane::test {

class SqliteLocker {
 public:
  explicit SqliteLocker(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
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

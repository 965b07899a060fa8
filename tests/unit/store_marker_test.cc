// The job store's marker (daemon/store_marker.h) read and written through the files it is given
// (os::Env's, os/file_system.h): here files in memory, so each refusal is tried without a disk,
// and a marker that were read from the disk instead would not be found and refuse nothing.
#include <gtest/gtest.h>

#include "daemon/store_marker.h"
#include "support/memory_files.h"

namespace gpulane::daemon {
namespace {

using test::MemoryFiles;
const std::string kDb = "/state/jobs.db";

bool Says(const Status& s, const std::string& part) { return !s.ok() && s.error().message.find(part) != std::string::npos; }

TEST(StoreMarker, AWrittenMarkerRecordsTheLargestIdInItsFilesAndRefusesAnOlderStore) {
  MemoryFiles files;
  ASSERT_TRUE(WriteStoreMarker(files, kDb, 7).ok());
  ASSERT_EQ(files.files.count("/state/jobs.db.known"), 1u) << "written beside the database, in the files given";
  EXPECT_NE(files.files["/state/jobs.db.known"].data.find("max_id 7\n"), std::string::npos);
  auto recorded = ReadStoreMarker(files, StoreMarkerPath(kDb));
  ASSERT_TRUE(recorded && *recorded);
  EXPECT_EQ(**recorded, 7);
  EXPECT_TRUE(CheckStoreIdsAgainstMarker(files, kDb, 9).ok()) << "ids used since it was written";
  Status older = CheckStoreIdsAgainstMarker(files, kDb, 3);
  EXPECT_TRUE(Says(older, "has job ids up to 3, but /state/jobs.db.known records ids up to 7")) << older.error().message;
}

TEST(StoreMarker, AMarkerRefusesAMissingOrEmptyDatabaseAndNothingWithoutOne) {
  MemoryFiles files;
  EXPECT_TRUE(CheckStoreFileAgainstMarker(files, kDb).ok()) << "no marker: nothing is known of an older store";
  ASSERT_TRUE(WriteStoreMarker(files, kDb, 4).ok());
  Status missing = CheckStoreFileAgainstMarker(files, kDb);
  EXPECT_EQ(missing.ok() ? ErrorKind::kInternal : missing.error().kind, ErrorKind::kStore);
  EXPECT_TRUE(Says(missing, "the job database /state/jobs.db is missing, but /state/jobs.db.known records a store "
                            "with job ids up to 4"));
  files.files[kDb] = {};
  EXPECT_TRUE(Says(CheckStoreFileAgainstMarker(files, kDb), "is empty (0 bytes)"));
  files.files[kDb].data = "SQLite format 3";
  EXPECT_TRUE(CheckStoreFileAgainstMarker(files, kDb).ok());
}

TEST(StoreMarker, AMarkerThatIsNoRegularFileOrHasNoIdIsNotTrusted) {
  MemoryFiles files;
  files.files["/state/jobs.db.known"] = {os::FileInfo::Kind::kSymlink, "/elsewhere"};
  files.files["/elsewhere"] = {os::FileInfo::Kind::kRegular, "max_id 9\n"};
  auto linked = ReadStoreMarker(files, "/state/jobs.db.known");
  ASSERT_FALSE(linked) << "a symlink is never followed";
  EXPECT_EQ(linked.error().message, "cannot read /state/jobs.db.known: not a readable file");
  files.files["/state/jobs.db.known"] = {os::FileInfo::Kind::kRegular, "# nothing else\n"};
  auto damaged = ReadStoreMarker(files, "/state/jobs.db.known");
  ASSERT_FALSE(damaged);
  EXPECT_NE(damaged.error().message.find("is damaged (no \"max_id\" line)"), std::string::npos);
}

}  // namespace
}  // namespace gpulane::daemon

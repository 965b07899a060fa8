// Integer keys of the config file (util/config.cc IntegerOf): a whole float is taken, anything
// else is a one-line error naming the key and its range; a float beyond 64 bits is an error, not
// undefined behaviour (fuzz_config found toml++'s value<int64_t>() converting 9.2e19 with UB; its
// input is kept in tests/fuzz/corpus/config/, which ctest's FuzzCorpus.config replays).
#include <gtest/gtest.h>

#include "support/config_file.h"
#include "util/config.h"

namespace gpulane {
namespace {

class ConfigIntegers : public test::ConfigFileTest {};

TEST_F(ConfigIntegers, WholeFloatsAreIntegersAndHugeOnesAreRefusedNamingTheRange) {
  Config config;
  ASSERT_TRUE(Load("[daemon]\nmax_waiting = 12.0\n", config).ok());
  EXPECT_EQ(config.max_waiting_supervisors, 12u);
  for (const std::string value : {"92233720368547758072.232", "1e300", "inf", "nan", "12.5", "100001", "0"})
    EXPECT_NE(ErrorOf("[daemon]\nmax_waiting = " + value + "\n").find("daemon.max_waiting must be an integer from 1 to 100000"),
              std::string::npos)
        << value;
  EXPECT_NE(ErrorOf("[limits]\nmax_queued = 1e19\n").find("limits.max_queued must be an integer from 0 to 1000000"),
            std::string::npos);
  EXPECT_NE(ErrorOf("[partitions.day]\ngpus = [0]\nmax_gpus_per_user = 4294967297\n")
                .find("partitions.day.max_gpus_per_user must be an integer from 1 to 1024"),
            std::string::npos)
      << "no silent wrap to 1 when cast to unsigned";
  EXPECT_NE(ErrorOf("[partitions.day]\ngpus = [1e30]\n").find("partitions.day.gpus"), std::string::npos);
}

}  // namespace
}  // namespace gpulane

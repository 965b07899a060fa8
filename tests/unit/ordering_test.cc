// PCI bus IDs in one form, and GPUs in PCI bus order (CUDA's PCI_BUS_ID order).
#include "gpu/ordering.h"

#include <gtest/gtest.h>

namespace gpulane {
namespace {

TEST(NormalizePciBusId, LegacyFourDigitDomainBecomesEightDigitsUpperCase) {
  EXPECT_EQ(NormalizePciBusId("0000:3b:00.0"), "00000000:3B:00.0");
  EXPECT_EQ(NormalizePciBusId("0001:c1:00.0"), "00000001:C1:00.0");
}

TEST(NormalizePciBusId, V3FormIsKeptButUpperCased) {
  EXPECT_EQ(NormalizePciBusId("00000000:00:06.0"), "00000000:00:06.0");
  EXPECT_EQ(NormalizePciBusId("00000000:db:00.0"), "00000000:DB:00.0");
  EXPECT_EQ(NormalizePciBusId("  00000000:18:00.0\n"), "00000000:18:00.0");
}

TEST(NormalizePciBusId, BothFormsOfOneGpuCompareEqual) {
  EXPECT_EQ(NormalizePciBusId("0000:ab:00.0"), NormalizePciBusId("00000000:AB:00.0"));
}

TEST(NormalizePciBusId, UnparsableTextIsReturnedAsIs) {
  EXPECT_EQ(NormalizePciBusId("not a bus id"), "not a bus id");
  EXPECT_EQ(NormalizePciBusId(""), "");
  EXPECT_EQ(NormalizePciBusId("123456789:00:00.0"), "123456789:00:00.0");
}

GpuDevice Gpu(unsigned nvml_index, std::string bus) {
  GpuDevice d;
  d.nvml_index = nvml_index;
  d.pci_bus_id = std::move(bus);
  d.uuid = "GPU-" + std::to_string(nvml_index);
  return d;
}

TEST(SortByPciBusId, OrdersByBusAndNumbersThePositions) {
  std::vector<GpuDevice> devices{Gpu(0, "00000000:C1:00.0"), Gpu(1, "00000000:01:00.0"), Gpu(2, "00000000:41:00.0"),
                                 Gpu(3, "00000000:81:00.0")};
  SortByPciBusId(devices);
  std::vector<unsigned> nvml_order;
  for (unsigned i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(devices[i].pci_index, i);
    nvml_order.push_back(devices[i].nvml_index);
  }
  EXPECT_EQ(nvml_order, (std::vector<unsigned>{1, 2, 3, 0}));
}

TEST(SortByPciBusId, HexDigitsSortByValue) {
  std::vector<GpuDevice> devices{Gpu(0, "00000000:DB:00.0"), Gpu(1, "00000000:9A:00.0"), Gpu(2, "00000000:2A:00.0"),
                                 Gpu(3, "00000001:18:00.0"), Gpu(4, "00000000:18:00.0")};
  SortByPciBusId(devices);
  std::vector<std::string> buses;
  for (const auto& d : devices) buses.push_back(d.pci_bus_id);
  EXPECT_EQ(buses, (std::vector<std::string>{"00000000:18:00.0", "00000000:2A:00.0", "00000000:9A:00.0",
                                             "00000000:DB:00.0", "00000001:18:00.0"}));
}

TEST(SortByPciBusId, GpusWithoutABusIdGoLastInNvmlOrder) {
  std::vector<GpuDevice> devices{Gpu(0, ""), Gpu(1, "00000000:07:00.0"), Gpu(2, ""), Gpu(3, "00000000:06:00.0")};
  SortByPciBusId(devices);
  EXPECT_EQ(devices[0].nvml_index, 3u);
  EXPECT_EQ(devices[1].nvml_index, 1u);
  EXPECT_EQ(devices[2].nvml_index, 0u);
  EXPECT_EQ(devices[3].nvml_index, 2u);
  EXPECT_EQ(devices[3].pci_index, 3u);
}

TEST(GpuSnapshot, NvmlOrderDiffersOnlyWhenSomeIndexDiffers) {
  GpuSnapshot same;
  same.devices = {Gpu(0, "00000000:06:00.0"), Gpu(1, "00000000:07:00.0")};
  SortByPciBusId(same.devices);
  EXPECT_FALSE(same.nvml_order_differs());
  GpuSnapshot swapped;
  swapped.devices = {Gpu(0, "00000000:07:00.0"), Gpu(1, "00000000:06:00.0")};
  SortByPciBusId(swapped.devices);
  EXPECT_TRUE(swapped.nvml_order_differs());
  EXPECT_EQ(swapped.FindByUuid("GPU-0")->pci_index, 1u);
  EXPECT_EQ(swapped.FindByUuid("GPU-9"), nullptr);
}

}  // namespace
}  // namespace gpulane

#pragma once
// Parsing and printing of memory sizes and durations as users type them.
#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace gpulane {

/// Parses a memory size: plain bytes ("1048576"), or a number with a unit: binary "KiB", "MiB",
/// "GiB", "TiB", and "K", "M", "G", "T" (taken as binary too, as nvidia-smi and PyTorch mean them),
/// decimal "KB", "MB", "GB", "TB", case-insensitive, an optional space, fractions allowed ("1.5GiB").
/// Returns bytes, or kInvalidArgument naming the text and the accepted forms.
Result<std::uint64_t> ParseSizeBytes(std::string_view text);

/// Parses a duration: plain seconds ("90"), or with a unit "ms", "s", "m"/"min", "h", "d"
/// (combinations like "1h30m"). Returns seconds (fractional), or kInvalidArgument.
Result<double> ParseDurationS(std::string_view text);

/// Formats bytes for people: "512 MiB", "20.0 GiB", "143 GiB" (binary units).
std::string FormatBytes(std::uint64_t bytes);

/// Formats seconds for people: "0.8 s", "12 s", "5m 03s", "2h 05m".
std::string FormatSeconds(double seconds);

/// Bytes to MiB, rounded down (nvidia-smi's unit).
inline std::uint64_t BytesToMib(std::uint64_t bytes) { return bytes >> 20; }

}  // namespace gpulane

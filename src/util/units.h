#pragma once
// Parsing and printing of memory sizes and durations as users type them.
#include <cstdint>
#include <string>
#include <utility>
#include <string_view>

#include "util/result.h"

namespace gpulane {

/// Parses a GPU memory size as users type it: a number and a unit, case-insensitive, an optional
/// space, fractions allowed ("1.5GiB", "20 G"). Units are binary whichever way they are spelt:
/// "KiB"/"K"/"KB", "MiB"/"M"/"MB", "GiB"/"G"/"GB", "TiB"/"T"/"TB" (GPU memory is sold and shown by
/// nvidia-smi in binary units: an "80GB" A100 has 80 GiB; reading 30GB as 30e9 bytes would declare
/// 2 GiB less than the job uses). "B" gives bytes ("32212254720B", for scripts).
/// A number without a unit is refused ("30": GiB or bytes?), except 0, which is the same in all.
/// Returns bytes, or kInvalidArgument quoting the text, with a suggestion ("did you mean 30GiB?").
Result<std::uint64_t> ParseSizeBytes(std::string_view text);

/// Parses a duration as users type it on the command line: numbers with a unit "ms", "s",
/// "m"/"min", "h", "d" (case-insensitive; combinations like "1h30m"). A number without a unit is
/// refused, except 0, which is the same in all ("--time-limit 90": Slurm users mean 90 minutes, the
/// code once read 90 seconds); the error suggests the number with `likely_unit`, the unit people
/// most likely mean for this option ("'90' has no unit: did you mean 90m? ..."). Returns seconds
/// (fractional), or kInvalidArgument quoting the text.
Result<double> ParseDurationS(std::string_view text, std::string_view likely_unit = "s");

/// As ParseDurationS, but a number without a unit is seconds ("90" = 90 s): for values whose unit
/// is seconds by convention or by an older promise: the configuration files' durations
/// (docs/config.md: files written for older versions keep their meaning), environment variables,
/// the HTTP API's query parameters, and refresh periods (status --watch, top --interval: seconds,
/// as for watch -n and top -d).
Result<double> ParseDurationOrSecondsS(std::string_view text);

/// Formats bytes for people: "512 MiB", "20.0 GiB", "143 GiB" (binary units).
std::string FormatBytes(std::uint64_t bytes);

/// Formats two sizes that are compared in one sentence ("139.8 GiB free at most < 140 GiB") so
/// that they read as different when they are: as FormatBytes when that tells them apart, else in
/// GiB (MiB below 1 GiB) with as many decimals as it takes, up to 3 (a whole number without any),
/// else in bytes ("150106472448B"). Equal sizes are formatted alike.
std::pair<std::string, std::string> FormatBytesApart(std::uint64_t a, std::uint64_t b);

/// Formats seconds for people: "0.8 s", "12 s", "5m 03s", "2h 05m".
std::string FormatSeconds(double seconds);

/// Bytes to MiB, rounded down (nvidia-smi's unit).
inline std::uint64_t BytesToMib(std::uint64_t bytes) { return bytes >> 20; }

/// Bytes in MiB, for a line that quotes figures to compare with nvidia-smi's: "20480 MiB", with one
/// decimal when not a whole number of MiB ("20480.5 MiB").
std::string FormatMib(std::uint64_t bytes);

}  // namespace gpulane

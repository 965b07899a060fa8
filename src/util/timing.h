#pragma once
// GPULANE_TIMING=1: commands print on stderr where their time goes ("gpulane: timing: <label>
// +X ms"), for finding start-up costs on real machines. Free when the variable is unset.
namespace gpulane {

/// Prints the milliseconds since the previous mark (or since the first call) with `label`.
void TimingMark(const char* label);

}  // namespace gpulane

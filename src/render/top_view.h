#pragma once
// `gpulane top`'s screen (issue 11, item 7): a model of plain values (the GPUs with their recent
// history, the processes on them, the queue) laid out as the lines of a terminal of a given size.
// Pure: no I/O, no clock, no terminal. cli/top_source.cc fills the model, cli/cmd_top.cc reads
// keys (render/top_keys.h) and writes the lines. Text fields hold what others chose (NVML's names,
// user and job names, command lines, reasons) as they came: the view escapes each one
// (util/terminal_text.h). Unknown readings are shown as unknown ("-", "n/a", "?"), never as 0.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpulane {

/// A GPU's reading at one moment of its history (the daemon's `history` points).
struct TopPoint {
  double time_s = 0;                        ///< seconds since the epoch
  std::optional<double> util_pct;           ///< GPU utilisation, 0..100
  std::optional<double> memory_used_bytes;
};

/// One GPU.
struct TopGpu {
  unsigned index = 0;                ///< PCI-order index (CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID)
  std::optional<std::string> name;   ///< NVML's name
  std::optional<std::string> error;  ///< set when the GPU failed: NVML's error
  std::optional<unsigned> util_pct;
  std::optional<std::uint64_t> memory_used_bytes;
  std::optional<std::uint64_t> memory_total_bytes;
  std::optional<unsigned> temperature_c;
  std::optional<unsigned> power_mw;
  std::optional<unsigned> power_limit_mw;
  std::string holders;          ///< who holds its leases: "job 12 (alice)"; "" nobody
  bool processes_known = true;  ///< NVML reported its process list
  std::vector<TopPoint> history;  ///< oldest first; empty without history
};

/// A process with a context on a GPU.
struct TopProcess {
  unsigned gpu = 0;  ///< PCI-order index
  std::uint32_t pid = 0;
  std::optional<std::string> user;          ///< absent: not visible here (another PID namespace)
  std::string job_id;                       ///< its gpulane job as people name it ("12", "12_3", "r4121"); "" none
  std::optional<std::uint64_t> memory_bytes;
  /// Its job's use of this GPU as the daemon's sampler meters it, else its own SM share when NVML
  /// reports it; absent: unknown.
  std::optional<double> util_pct;
  std::optional<std::string> command;       ///< its command line; absent: not visible here
};

/// A queued or running job (the daemon's `queue`).
struct TopJob {
  std::string id;                 ///< "12", "12_3"
  std::string user;
  std::string name;
  std::string state;              ///< "pending", "launching", "running", "held"
  std::string gpus;               ///< what it asks for: "2", "1x20.0 GiB"
  std::optional<double> age_s;    ///< seconds since it was submitted
  std::string where;              ///< "GPU0,GPU1" when running, else why it waits
};

/// Everything one screen shows.
struct TopModel {
  std::string hostname;
  double now_s = 0;                          ///< seconds since the epoch
  std::optional<std::string> driver_version;
  std::vector<TopGpu> gpus;
  std::vector<TopProcess> processes;
  bool queue_known = false;                  ///< a daemon answered `queue`
  std::vector<TopJob> jobs;
  bool has_history = false;                  ///< the daemon's sampler gave history: sparklines
  double span_s = 300;                       ///< sparklines cover [now_s - span_s, now_s]
  double sample_interval_s = 1;              ///< the sampler's interval (a sparkline cell holds a reading that long)
  std::vector<std::string> notes;            ///< one line each, under the header (they may quote the daemon: escaped)
  double refresh_s = 1;                      ///< how often the screen is refreshed, seconds
};

/// The order of the process list.
enum class TopSort { kGpu, kMemory, kUtil, kUser, kPid };

/// "gpu", "memory", "util", "user", "pid".
const char* TopSortName(TopSort sort);

/// What the user chose with keys (render/top_keys.h).
struct TopUi {
  TopSort sort = TopSort::kGpu;
  bool reverse = false;
  std::string user_filter;  ///< only this user's processes and jobs; "" every user's
  bool editing = false;     ///< the filter prompt is open
  std::string edit_text;    ///< what was typed at it so far
};

/// How the screen is drawn.
struct TopStyle {
  bool color = false;   ///< ANSI colours (a terminal without NO_COLOR)
  bool unicode = true;  ///< block characters for bars and sparklines (a UTF-8 locale), else ASCII
};

/// The processes `ui` selects (user_filter), in its order. Unknown values sort last either way.
std::vector<TopProcess> SortedProcesses(const std::vector<TopProcess>& processes, const TopUi& ui);

/// The screen: at most `height` lines, each at most `width` columns (SGR colour codes aside). From
/// the top: a header, the notes, a line per GPU (bars, figures, lease holders) and under it its
/// sparklines when there is history and room, the processes, the queue, and a line of keys or the
/// filter prompt last. Sections that do not fit are cut with a "... N more" line.
std::vector<std::string> RenderTop(const TopModel& model, const TopUi& ui, const TopStyle& style, std::size_t width,
                                   std::size_t height);

}  // namespace gpulane

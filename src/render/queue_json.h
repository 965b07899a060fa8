#pragma once
// `gpulane queue --json`: the job list as JSON text, written by the daemon straight from its jobs
// (no JSON tree per job: building 100,000 of them and printing them took seconds). The text is
// byte for byte what nlohmann::json's dump(2) prints for the list of job objects of the protocol
// (docs/protocol.md "Job object": store::JobToJson without the environment, plus "gpu_indices";
// both written from one field list, store/job_fields.h):
// keys sorted, two spaces per level, numbers as nlohmann prints them, strings escaped alike
// (invalid UTF-8 replaced by U+FFFD).
#include <cstddef>
#include <string>
#include <vector>

#include "store/job.h"

namespace gpulane {

/// Appends `job`'s object at nesting depth 1 (as an element of the top-level list: its lines
/// indented by 2, its closing brace too, no leading indentation). `gpu_indices`: PCI-order
/// indices of the GPUs it runs on. `commands` false: its command line, directory and log paths
/// hidden as store::HideFields hides them (store/job_view.h).
void AppendQueueJobJson(const store::Job& job, const std::vector<unsigned>& gpu_indices, std::string& out,
                        bool commands = true);

/// The list around the elements, as dump(2) writes it: QueueJsonSeparator(i) before element i,
/// QueueJsonEnd(n) after the last of n (with the final newline `gpulane queue --json` prints).
/// An empty list is "[]\n".
const char* QueueJsonSeparator(std::size_t index);
const char* QueueJsonEnd(std::size_t count);

}  // namespace gpulane

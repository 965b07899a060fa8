#pragma once
// Retention of finished jobs in the job store (JobStore::PruneFinished, JobStore::PrunedAfter,
// defined in job_retention.cc): what schema version 10 adds for it.

namespace gpulane::store {

/// Schema step 9 -> 10: an index of finished jobs by their end (each slice finds the oldest ends
/// without walking unfinished jobs), the runs of ids removed (pruned_ids: first_id..last_id, and
/// daemon.keep_finished in seconds when they were), and submissions by their first id.
extern const char* const kRetentionSchema;

}  // namespace gpulane::store

#include "daemon/parse_worker.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <utility>

#include "proto/wire.h"

namespace gpulane::daemon {

ParseWorker::ParseWorker() {
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ >= 0) thread_ = std::thread([this] { Run(); });
}

ParseWorker::~ParseWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  if (event_fd_ >= 0) close(event_fd_);
}

void ParseWorker::Parse(int fd, std::uint64_t serial, std::string payload) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    todo_.push_back({fd, serial, std::move(payload)});
  }
  wake_.notify_one();
}

std::vector<ParseWorker::Parsed> ParseWorker::Take() {
  std::uint64_t count = 0;
  ssize_t n = read(event_fd_, &count, sizeof count);  // resets the counter; nothing to do when empty
  (void)n;
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(done_, {});
}

void ParseWorker::Run() {
  while (true) {
    Frame frame;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stop_ || !todo_.empty(); });
      if (stop_) return;
      frame = std::move(todo_.front());
      todo_.pop_front();
    }
    Parsed parsed;
    parsed.fd = frame.fd;
    parsed.serial = frame.serial;
    parsed.bytes = frame.payload.size();
    // The depth first: a deeper request would overflow the stack of code that walks it.
    parsed.too_deep = proto::NestingDepth(frame.payload) > proto::kMaxRequestDepth;
    if (!parsed.too_deep) parsed.request = nlohmann::json::parse(frame.payload, nullptr, false);
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_.push_back(std::move(parsed));
    }
    const std::uint64_t one = 1;
    ssize_t n = write(event_fd_, &one, sizeof one);
    (void)n;
  }
}

}  // namespace gpulane::daemon

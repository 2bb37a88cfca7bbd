// thread_pool.hpp: the runtime path's one pool of std::threads, and parallel_for over tasks.
//
// Work is cut into tasks whose boundaries never depend on the number of threads (a task is a
// head, a block of queries, a tile of a product), and every task computes its outputs alone,
// in a fixed order. So results are identical bit for bit with 1, 2 or N threads; threads only
// decide who runs which task.
//
// Idle workers sleep on a condition variable; they never spin. A benchmark or a program that
// also uses another pool (OpenMP, OpenBLAS) does not have two pools fighting over two cores
// (docs/performance.md).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace qkv::runtime {

/// @brief a fixed set of worker threads; the thread that calls parallel_for works too.
class thread_pool {
 public:
  /// threads: how many threads run tasks, the caller included (1 = no workers)
  explicit thread_pool(std::size_t threads = 1) { start(threads); }
  ~thread_pool() { stop(); }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  [[nodiscard]] std::size_t size() const { return workers_.size() + 1; }

  /// change the number of threads (the caller included); not while a parallel_for runs
  void resize(std::size_t threads) {
    if (threads == 0) threads = 1;
    if (threads == size()) return;
    stop();
    start(threads);
  }

  /// @brief run f(0) .. f(tasks - 1), each once, spread over the pool; returns when all are
  /// done. The first exception a task throws is rethrown here (the other tasks still run).
  /// Called from inside a task, it runs the tasks inline (no nested parallelism).
  template <class F>
  void parallel_for(std::size_t tasks, F&& f) {
    if (tasks == 0) return;
    if (tasks == 1 || workers_.empty() || inside_task()) {
      const bool outer = !inside_task();
      if (outer) inside_task() = true;
      try {
        for (std::size_t t = 0; t < tasks; ++t) f(t);
      } catch (...) {
        if (outer) inside_task() = false;
        throw;
      }
      if (outer) inside_task() = false;
      return;
    }
    std::lock_guard serial(run_mutex_);  // one parallel_for at a time per pool
    job j;
    j.fn = &f;
    j.call = [](void* fn, std::size_t t) { (*static_cast<std::remove_reference_t<F>*>(fn))(t); };
    j.tasks = tasks;
    {
      std::lock_guard lock(mutex_);
      job_ = &j;
      ++generation_;
    }
    wake_.notify_all();
    work(j);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return j.finished_workers == workers_.size(); });
    job_ = nullptr;
    if (j.error) std::rethrow_exception(j.error);
  }

 private:
  struct job {
    void* fn = nullptr;
    void (*call)(void*, std::size_t) = nullptr;
    std::size_t tasks = 0;
    std::atomic<std::size_t> next{0};
    std::size_t finished_workers = 0;  // guarded by mutex_
    std::exception_ptr error;          // guarded by mutex_
  };

  static bool& inside_task() {
    thread_local bool flag = false;
    return flag;
  }

  void work(job& j) {
    inside_task() = true;
    for (std::size_t t; (t = j.next.fetch_add(1, std::memory_order_relaxed)) < j.tasks;) {
      try {
        j.call(j.fn, t);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!j.error) j.error = std::current_exception();
      }
    }
    inside_task() = false;
  }

  void start(std::size_t threads) {
    quit_ = false;
    const std::size_t now = generation_;  // a new worker waits for the next job, not a past one
    for (std::size_t w = 1; w < threads; ++w)
      workers_.emplace_back([this, now] {
        std::size_t seen = now;
        for (;;) {
          job* j;
          {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return quit_ || generation_ != seen; });
            if (quit_) return;
            seen = generation_;
            j = job_;
          }
          work(*j);
          {
            std::lock_guard lock(mutex_);
            ++j->finished_workers;
          }
          done_.notify_one();
        }
      });
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_, run_mutex_;
  std::condition_variable wake_, done_;
  job* job_ = nullptr;
  std::size_t generation_ = 0;
  bool quit_ = false;
};

/// @brief the library's pool, shared by every runtime kernel; one thread until set_threads.
inline thread_pool& default_pool() {
  static thread_pool pool(1);
  return pool;
}

/// how many threads the runtime kernels use (the caller included); 0 means all the cores
inline void set_threads(std::size_t n) {
  if (n == 0) n = std::max(1u, std::thread::hardware_concurrency());
  default_pool().resize(n);
}

[[nodiscard]] inline std::size_t threads() { return default_pool().size(); }

}  // namespace qkv::runtime

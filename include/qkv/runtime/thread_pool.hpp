// thread_pool.hpp: the runtime path's one pool of std::threads, and parallel_for over tasks.
//
// Work is cut into tasks whose boundaries never depend on the number of threads (a task is a
// head, a block of queries, a tile of a product), and every task computes its outputs alone,
// in a fixed order. So results are identical bit for bit with 1, 2 or N threads; threads only
// decide who runs which task.
//
// An idle worker spins for a short, bounded time (spin(), default 200 us) watching for the next
// job, then sleeps on a condition variable; the caller waits for the workers the same way. A
// sleeping worker takes 30-80 us to start on a virtual machine (measured, docs/performance.md,
// "The pool's spin"), about a tenth of a decode step or of a BERT layer's product; calls that
// come within the spin of each other find the workers awake. After the spin nothing runs: a
// program that also uses another pool (OpenMP, OpenBLAS) loses at most the spin per call, and
// set_spin(0) gives the old sleep-at-once pool.
//
// Several user threads may use one pool at once: their parallel_for calls take turns (one job
// at a time per pool), and resize (set_threads) waits for the running job, so changing the
// number of threads while other threads compute is safe and changes no result. resize from
// inside a task would wait for its own job: it throws std::logic_error instead.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#if defined(QKV_RUNTIME_KERNELS) || defined(QKV_KERNELS_TARGET)
// with libqkv_kernels (kernels.hpp): the per-thread "inside a task" flag lives in the library,
// so that the program's copy of this header and each of the library's hidden copies see one
// flag: a forwarded call made from inside a task (or a task the library started) runs inline
// instead of waiting for its own pool
extern "C" [[gnu::visibility("default")]] bool* qkv_kernels_task_flag() noexcept;
#endif

namespace qkv::runtime {

/// @brief a fixed set of worker threads; the thread that calls parallel_for works too.
class thread_pool {
 public:
  /// threads: how many threads run tasks, the caller included (1 = no workers; 0 = one per
  /// core, hardware_threads(), as set_threads(0) and resize(0))
  explicit thread_pool(std::size_t threads = 1) { start(threads == 0 ? hardware_threads() : threads); }
  ~thread_pool() { stop(); }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  /// how many threads run tasks, the caller included (another thread's resize may change it)
  [[nodiscard]] std::size_t size() const { return size_.load(std::memory_order_acquire); }

  /// how long an idle worker (and a caller waiting for its workers) watches for work before it
  /// sleeps
  [[nodiscard]] std::chrono::microseconds spin() const {
    return std::chrono::microseconds(spin_us_.load(std::memory_order_relaxed));
  }

  /// @brief set spin(); 0 makes idle threads sleep at once. Safe while the pool runs: a worker
  /// already spinning uses the value it read when it began.
  void set_spin(std::chrono::microseconds t) {
    spin_us_.store(t.count() > 0 ? t.count() : 0, std::memory_order_relaxed);
  }

  /// one per core: std::thread::hardware_concurrency(), or 1 when it is unknown (it returns 0)
  [[nodiscard]] static std::size_t hardware_threads() {
    return std::max(1u, std::thread::hardware_concurrency());
  }

  /// @brief change the number of threads (the caller included; 0 means one per core,
  /// hardware_threads(), as in the constructor and set_threads). Waits until a
  /// parallel_for that another thread is running has finished; calls that start meanwhile wait
  /// for the resize. Throws std::logic_error when called from inside a task (it would wait for
  /// its own job).
  void resize(std::size_t threads) {
    if (inside_task())
      throw std::logic_error(
          "thread_pool::resize (or set_threads) called from inside a parallel_for task: it "
          "would wait for its own job; resize between calls instead");
    if (threads == 0) threads = hardware_threads();
    std::lock_guard serial(run_mutex_);  // no job runs on this pool while the workers change
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
    if (tasks == 1 || size() == 1 || inside_task()) return run_inline(tasks, f);
    std::lock_guard serial(run_mutex_);                 // one parallel_for at a time per pool, and no resize
    if (workers_.empty()) return run_inline(tasks, f);  // resized to 1 since size() was read
    job j;
    j.fn = &f;
    j.call = [](void* fn, std::size_t t) { (*static_cast<std::remove_reference_t<F>*>(fn))(t); };
    j.tasks = tasks;
    const std::size_t workers = workers_.size();
    {
      std::lock_guard lock(mutex_);
      job_ = &j;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();  // no system call when every worker is spinning
    work(j);
    spin_until([&] { return j.finished_workers.load(std::memory_order_acquire) == workers; });
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return j.finished_workers.load(std::memory_order_acquire) == workers; });
    job_ = nullptr;
    if (j.error) std::rethrow_exception(j.error);
  }

 private:
  struct job {
    void* fn = nullptr;
    void (*call)(void*, std::size_t) = nullptr;
    std::size_t tasks = 0;
    std::atomic<std::size_t> next{0};
    std::atomic<std::size_t> finished_workers{0};  // changed under mutex_, read by a spinning caller
    std::exception_ptr error;                      // guarded by mutex_
  };

  template <class F>
  static void run_inline(std::size_t tasks, F& f) {
    const bool outer = !inside_task();
    if (outer) inside_task() = true;
    try {
      for (std::size_t t = 0; t < tasks; ++t) f(t);
    } catch (...) {
      if (outer) inside_task() = false;
      throw;
    }
    if (outer) inside_task() = false;
  }

  /// @brief return when ready() or when spin() has passed, whichever comes first (the caller
  /// then waits on its condition variable, which returns at once if ready())
  template <class Ready>
  void spin_until(Ready ready) const {
    const auto limit = spin();
    if (limit.count() == 0) return;
    const auto start = std::chrono::steady_clock::now();
    for (unsigned i = 1; !ready(); ++i) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();  // frees the core's shared resources for the other hyperthread
#endif
      if (i % 64 == 0 && std::chrono::steady_clock::now() - start >= limit) return;
    }
  }

  static bool& inside_task() {
#if defined(QKV_RUNTIME_KERNELS) || defined(QKV_KERNELS_TARGET)
    return *qkv_kernels_task_flag();
#else
    thread_local bool flag = false;
    return flag;
#endif
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
    quit_.store(false, std::memory_order_release);
    size_.store(1, std::memory_order_release);
    const std::size_t now =
        generation_.load(std::memory_order_acquire);  // a new worker waits for the next job
    for (std::size_t w = 1; w < threads; ++w)
      workers_.emplace_back([this, now] {
        std::size_t seen = now;
        for (;;) {
          job* j;
          const auto news = [&] {
            return quit_.load(std::memory_order_acquire) ||
                   generation_.load(std::memory_order_acquire) != seen;
          };
          spin_until(news);  // then the wait below returns at once, or sleeps
          {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, news);
            if (quit_.load(std::memory_order_relaxed)) return;
            seen = generation_.load(std::memory_order_relaxed);
            j = job_;
          }
          work(*j);
          {
            std::lock_guard lock(mutex_);
            j->finished_workers.fetch_add(1, std::memory_order_release);
          }
          done_.notify_one();  // no system call when the caller is spinning
        }
      });
    size_.store(workers_.size() + 1, std::memory_order_release);
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      quit_.store(true, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_, run_mutex_;
  std::condition_variable wake_, done_;
  job* job_ = nullptr;                      // guarded by mutex_
  std::atomic<std::size_t> generation_{0};  // changed under mutex_, read by spinning workers
  std::atomic<bool> quit_{false};           // likewise
  std::atomic<long long> spin_us_{200};
  std::atomic<std::size_t> size_{1};  // workers_.size() + 1, readable without run_mutex_
};

/// @brief the library's pool, shared by every runtime kernel; one thread until set_threads.
inline thread_pool& default_pool() {
  static thread_pool pool(1);
  return pool;
}

/// how many threads the runtime kernels use (the caller included); 0 means one per core
/// (thread_pool::hardware_threads()), the same as thread_pool::resize(0) and thread_pool(0)
inline void set_threads(std::size_t n) { default_pool().resize(n); }

[[nodiscard]] inline std::size_t threads() { return default_pool().size(); }

/// how long the runtime kernels' idle threads watch for work before they sleep (thread_pool::spin)
inline void set_spin(std::chrono::microseconds t) { default_pool().set_spin(t); }

}  // namespace qkv::runtime

// Several user threads calling the runtime at once: attention (both paths), the encoder layer and
// linear, on the shared default pool (2 threads), on a pool of their own (2 threads) and on no
// pool, must give the single-thread bits. scripts/test.sh also runs this under ThreadSanitizer
// (build clang-tsan), where a data race fails the test. Also: sizes past a stated limit are
// refused before allocating, with the size and the limit named, and the pool keeps working.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <cstddef>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <qkv/runtime/encoder.hpp>
#include <qkv/runtime/runtime.hpp>

#include "../support/runtime.hpp"

namespace rt = qkv::runtime;
using qkv::testing::random_matrix;
using rt::dynamic_matrix;

namespace {

/// the inputs of every call, and their single-thread results
struct workload {
  dynamic_matrix<float> x = random_matrix<float>(200, 32, 1);
  rt::attention_weights<float> aw;
  rt::linear_weights<float> lw{random_matrix<float>(48, 32, 2, 0.2), std::vector<float>(48, 0.5f)};
  rt::encoder_layer_parameters<float> ew;
  rt::encoder_options ec{32, 4, 64, qkv::activation::gelu, false, 1e-5, false};
  // single-thread results
  dynamic_matrix<float> attention_kept, attention_streamed, encoded, linear_out;

  workload() {
    unsigned seed = 10;
    for (auto* l : {&aw.q, &aw.k, &aw.v}) {
      l->weight = random_matrix<float>(32, 32, seed++, 0.2);
      l->bias.assign(32, 0.01f);
    }
    aw.o = rt::linear_weights<float>{random_matrix<float>(32, 32, seed++, 0.2), {}};
    ew.in_proj_weight = random_matrix<float>(96, 32, seed++, 0.2);
    ew.in_proj_bias.assign(96, 0.0f);
    ew.out_proj_weight = random_matrix<float>(32, 32, seed++, 0.2);
    ew.out_proj_bias.assign(32, 0.0f);
    ew.linear1_weight = random_matrix<float>(64, 32, seed++, 0.2);
    ew.linear1_bias.assign(64, 0.1f);
    ew.linear2_weight = random_matrix<float>(32, 64, seed++, 0.2);
    ew.linear2_bias.assign(32, 0.1f);
    ew.norm1_weight.assign(32, 1.0f);
    ew.norm1_bias.assign(32, 0.0f);
    ew.norm2_weight.assign(32, 1.0f);
    ew.norm2_bias.assign(32, 0.0f);
    attention_kept = attention(true, nullptr);
    attention_streamed = attention(false, nullptr);
    encoded = encode(nullptr);
    linear_out = rt::linear(x, lw, nullptr);
  }
  [[nodiscard]] dynamic_matrix<float> attention(bool keep, rt::thread_pool* pool) const {
    rt::attention_options<float> opt;
    opt.heads = 4;
    opt.causal = true;
    opt.keep_weights = keep;
    return rt::attention(x, x, aw, opt, pool).output;
  }
  [[nodiscard]] dynamic_matrix<float> encode(rt::thread_pool* pool) const {
    rt::encoder_run_options run;
    run.keep_weights = false;
    rt::encoder_layer_result<float> tr;
    rt::encoder_layer(x, ew, ec, run, tr, pool);
    return tr.output;
  }
};

}  // namespace

TEST_CASE(
    "user threads calling attention, the encoder and linear at once get the single-thread bits, on any "
    "pool") {
  const workload w;
  // the work is above the kernels' threshold for using the pool: 4 heads x 200 x 200 x 16 > 2^17
  rt::set_threads(2);
  REQUIRE(rt::threads() == 2);
  constexpr std::size_t user_threads = 4, rounds = 6;
  std::atomic<std::size_t> calls{0}, mismatches{0};
  std::vector<std::thread> users;
  for (std::size_t u = 0; u < user_threads; ++u)
    users.emplace_back([&, u] {
      rt::thread_pool own(2);
      // user thread u: the shared pool, its own pool, or none, in turn
      rt::thread_pool* pools[] = {&rt::default_pool(), &own, nullptr};
      for (std::size_t r = 0; r < rounds; ++r) {
        rt::thread_pool* pool = pools[(u + r) % 3];
        const auto check = [&](bool same) {
          calls++;
          if (!same) mismatches++;
        };
        check(w.attention(true, pool) == w.attention_kept);
        check(w.attention(false, pool) == w.attention_streamed);
        check(w.encode(pool) == w.encoded);
        check(rt::linear(w.x, w.lw, pool) == w.linear_out);
      }
    });
  for (auto& t : users) t.join();
  rt::set_threads(1);
  MESSAGE(user_threads << " user threads, " << calls.load()
                       << " calls (attention kept and streamed, encoder layer, "
                       << "linear) on the shared 2-thread pool, their own 2-thread pools and no pool");
  CHECK(calls.load() == user_threads * rounds * 4);
  CHECK(mismatches.load() == 0);
}

TEST_CASE("set_threads while other user threads compute on the shared pool changes no result") {
  // One thread changes the shared pool's size 1 -> 2 -> 3 -> 1 ... while two user threads call
  // attention (streamed) and linear on it. resize waits for the running job and the next job
  // waits for the resize, so every call sees a whole pool and, as results never depend on the
  // number of threads, gives the single-thread bits. Under ThreadSanitizer (clang-tsan) a race
  // between resize and a job fails the test.
  const workload w;
  constexpr std::size_t user_threads = 2, rounds = 5, resizes = 24;
  std::atomic<std::size_t> calls{0}, mismatches{0};
  std::atomic<bool> users_done{false};
  std::size_t resized = 0;
  std::thread resizer([&] {
    for (std::size_t r = 0; r < resizes || !users_done.load(); ++r) {
      rt::set_threads(1 + r % 3);
      ++resized;
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> users;
  for (std::size_t u = 0; u < user_threads; ++u)
    users.emplace_back([&] {
      for (std::size_t r = 0; r < rounds; ++r) {
        calls += 2;
        if (!(w.attention(false, &rt::default_pool()) == w.attention_streamed)) mismatches++;
        if (!(rt::linear(w.x, w.lw, &rt::default_pool()) == w.linear_out)) mismatches++;
      }
    });
  for (auto& t : users) t.join();
  users_done = true;
  resizer.join();
  rt::set_threads(1);
  MESSAGE(calls.load() << " calls while the pool was resized " << resized << " times");
  CHECK(resized >= resizes);
  CHECK(calls.load() == user_threads * rounds * 2);
  CHECK(mismatches.load() == 0);
  CHECK(rt::threads() == 1);
}

TEST_CASE("resize from inside a task is refused with std::logic_error and the pool works on") {
  rt::thread_pool pool(2);
  std::atomic<std::size_t> refused{0}, ran{0};
  pool.parallel_for(4, [&](std::size_t) {
    ran++;
    try {
      pool.resize(3);
    } catch (const std::logic_error& e) {
      if (std::string(e.what()).find("inside a parallel_for task") != std::string::npos) refused++;
    }
  });
  CHECK(ran.load() == 4);
  CHECK(refused.load() == 4);
  CHECK(pool.size() == 2);
  pool.resize(3);
  CHECK(pool.size() == 3);
  std::atomic<std::size_t> sum{0};
  pool.parallel_for(100, [&](std::size_t t) { sum += t; });
  CHECK(sum.load() == 4950);
  // 0 means one per core everywhere: resize(0), thread_pool(0) and set_threads(0) agree
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  CHECK(rt::thread_pool::hardware_threads() == cores);
  pool.resize(0);
  CHECK(pool.size() == cores);
  CHECK(rt::thread_pool(0).size() == cores);
  pool.resize(1);
  CHECK(pool.size() == 1);
  const std::size_t before = rt::threads();
  rt::set_threads(0);
  CHECK(rt::threads() == cores);
  rt::set_threads(before);
}

TEST_CASE("spinning, sleeping at once and a spin changed while jobs run give the same bits") {
  // The spin decides only how a worker waits for the next job, never who computes what: the
  // shared pool at spin 0 (sleep at once), at the default and at 50 ms, and with another thread
  // changing the spin during the calls, gives the single-thread bits (ThreadSanitizer checks
  // the spinning reads in clang-tsan).
  const workload w;
  rt::set_threads(2);
  const auto default_spin = rt::default_pool().spin();
  CHECK(default_spin == std::chrono::microseconds(200));
  std::size_t mismatches = 0;
  for (const auto t : {std::chrono::microseconds(0), default_spin, std::chrono::microseconds(50000)}) {
    rt::set_spin(t);
    for (int r = 0; r < 3; ++r) {
      if (!(w.attention(false, &rt::default_pool()) == w.attention_streamed)) mismatches++;
      if (!(rt::linear(w.x, w.lw, &rt::default_pool()) == w.linear_out)) mismatches++;
    }
  }
  std::atomic<bool> done{false};
  std::thread changer([&] {
    for (long long r = 0; !done.load(); ++r) {
      rt::set_spin(std::chrono::microseconds(r % 3 * 100));
      std::this_thread::yield();
    }
  });
  for (int r = 0; r < 5; ++r)
    if (!(w.attention(false, &rt::default_pool()) == w.attention_streamed)) mismatches++;
  done = true;
  changer.join();
  rt::set_spin(default_spin);
  rt::set_threads(1);
  CHECK(mismatches == 0);
}

TEST_CASE("an idle pool stops using the processor after its spin, and a long spin does not delay its end") {
  // After a job the two workers spin for spin() = 2 ms, then sleep: over the next 300 ms the
  // process uses at most the 2 x 2 ms of spinning plus scheduling noise, far below the 600 ms
  // two spinning workers would use (the bound 150 ms leaves room for a slow sanitizer build).
  {
    rt::thread_pool pool(3);
    pool.set_spin(std::chrono::microseconds(2000));
    std::atomic<std::size_t> sum{0};
    pool.parallel_for(64, [&](std::size_t t) { sum += t; });
    CHECK(sum.load() == 2016);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the spin
    const std::clock_t before = std::clock();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const double cpu_ms = 1000.0 * double(std::clock() - before) / CLOCKS_PER_SEC;
    MESSAGE("processor time of the idle pool over 300 ms: " << cpu_ms << " ms");
    CHECK(cpu_ms < 150.0);
  }
  // a spin of 60 s: the destructor's quit ends the spin, so the pool ends at once
  const auto start = std::chrono::steady_clock::now();
  {
    rt::thread_pool pool(3);
    pool.set_spin(std::chrono::seconds(60));
    CHECK(pool.spin() == std::chrono::microseconds(60000000));
    std::atomic<std::size_t> sum{0};
    pool.parallel_for(10, [&](std::size_t t) { sum += t; });
    CHECK(sum.load() == 45);
  }
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(took < std::chrono::seconds(30));
  rt::thread_pool pool(2);
  pool.set_spin(std::chrono::microseconds(-5));  // negative means 0
  CHECK(pool.spin() == std::chrono::microseconds(0));
}

TEST_CASE(
    "kept weights past the limit are refused before allocating, naming the size; the pool then works on") {
  rt::thread_pool pool(2);
  const auto x = random_matrix<float>(100000, 4, 3);
  rt::attention_weights<float> w;
  for (auto* l : {&w.q, &w.k, &w.v}) l->weight = random_matrix<float>(8, 4, 4, 0.5);
  rt::attention_options<float> opt;
  opt.keep_weights = true;
  opt.heads = 2;
  // 2 heads x 100000 x 100000 scores and weights of 4 bytes: 160 GB (more than this machine has)
  try {
    (void)rt::attention(x, x, w, opt, &pool);
    FAIL("no exception");
  } catch (const rt::size_limit_error& e) {
    const std::string what = e.what();
    CHECK(what.find("2 heads x 100000x100000") != std::string::npos);
    CHECK(what.find("needs 160000000000 bytes") != std::string::npos);
    CHECK(what.find("over the limit of 4294967296") != std::string::npos);
    CHECK(what.find("keep_weights = false") != std::string::npos);
  }
  // the limit is the caller's to move: just under this call's 2 x 2 heads x 3 x 3 x 4 = 144 bytes
  const auto small = random_matrix<float>(3, 4, 5);
  opt.max_weights_bytes = 143;
  CHECK_THROWS_AS((void)rt::attention(small, small, w, opt, &pool), rt::size_limit_error);
  opt.max_weights_bytes = 144;
  CHECK(rt::attention(small, small, w, opt, &pool).weights.size() == 2);
  // streaming needs no T x S memory: 30 queries over the 100000 keys run
  opt.keep_weights = false;
  opt.max_weights_bytes = rt::default_max_weights_bytes;
  const auto few = random_matrix<float>(30, 4, 6);
  const auto r = rt::attention(few, x, w, opt, &pool);
  CHECK(r.output.rows() == 30);
  // and the encoder passes its own limit on
  rt::encoder_layer_parameters<float> ew;
  ew.in_proj_weight = dynamic_matrix<float>(12, 4);
  ew.in_proj_bias.assign(12, 0);
  ew.out_proj_weight = dynamic_matrix<float>(4, 4);
  ew.out_proj_bias.assign(4, 0);
  ew.linear1_weight = dynamic_matrix<float>(8, 4);
  ew.linear1_bias.assign(8, 0);
  ew.linear2_weight = dynamic_matrix<float>(4, 8);
  ew.linear2_bias.assign(4, 0);
  ew.norm1_weight.assign(4, 1);
  ew.norm1_bias.assign(4, 0);
  ew.norm2_weight.assign(4, 1);
  ew.norm2_bias.assign(4, 0);
  rt::encoder_run_options run;
  run.keep_weights = true;       // the limit is on kept weights
  run.max_weights_bytes = 1000;  // 1 head x 20 x 20 x 2 x 4 = 3200 bytes
  rt::encoder_layer_result<float> tr;
  CHECK_THROWS_AS(rt::encoder_layer(random_matrix<float>(20, 4, 7), ew, {4, 1, 8}, run, tr, &pool),
                  rt::size_limit_error);
}

TEST_CASE("a matrix past max_matrix_bytes, or whose size overflows, is refused before allocating") {
  try {
    dynamic_matrix<float> m(std::size_t(1) << 20, std::size_t(1) << 19);  // 2^39 floats = 2 TiB
    FAIL("no exception");
  } catch (const rt::size_limit_error& e) {
    CHECK(std::string(e.what()) ==
          "dynamic_matrix: 1048576x524288 elements of 4 bytes need 2199023255552 bytes, over the limit of "
          "1099511627776 (runtime::max_matrix_bytes)");
  }
  // rows x cols overflows size_t: it once wrapped around to a small allocation
  CHECK_THROWS_AS(dynamic_matrix<double>(std::size_t(1) << 62, 8), rt::size_limit_error);
  dynamic_matrix<float> m(2, 2);
  CHECK_THROWS_AS(m.resize(std::size_t(1) << 40, 1), rt::size_limit_error);
  CHECK(m.rows() == 2);  // a refused resize leaves the matrix as it was
  CHECK(m.size() == 4);
}

TEST_CASE("a task's failed allocation reaches the caller as std::bad_alloc and the pool runs the next job") {
  rt::thread_pool pool(2);
  std::atomic<int> ran{0};
  CHECK_THROWS_AS(pool.parallel_for(8,
                                    [&](std::size_t t) {
                                      ran++;
                                      if (t == 5) throw std::bad_alloc();
                                    }),
                  std::bad_alloc);
  CHECK(ran.load() == 8);  // the other tasks still ran
  const auto x = random_matrix<float>(300, 32, 8);
  const auto y = random_matrix<float>(32, 40, 9);
  CHECK(rt::matrix_product(x, y, &pool) == rt::matrix_product(x, y, nullptr));
}

// walkthroughs.hpp: the worked examples' walkthroughs, one function per example, each defined
// by tools/explain/walkthrough.cpp compiled for that example (see tools/meson.build).
#pragma once

namespace qkv::cli::walkthroughs {
void illustrated();          // examples/01_illustrated_self_attention.cpp
void illustrated_exact();    // examples/01b_illustrated_exact.cpp
void from_scratch();         // examples/02_self_attention_from_scratch.cpp
void the_math();             // examples/03_walking_through_the_math.cpp
void the_math_exact();       // examples/03b_walking_through_the_math_exact.cpp (needs Boost)
void bert();                 // examples/04_bert_self_attention.cpp (the stand-in embeddings)
void statquest();            // examples/05_statquest_self_attention.cpp
void masking();              // examples/06_masking.cpp
void positional_encoding();  // examples/07_positional_encoding.cpp
void encoder_layer();        // examples/08_encoder_layer.cpp
void flash();                // examples/09_flash_attention.cpp
void kv_cache();             // examples/10_kv_cache_decoding.cpp
void grouped_query();        // examples/11_grouped_query_attention.cpp
void rope();                 // examples/12_rope.cpp
void alibi();                // examples/13_alibi_and_windows.cpp
void batches();              // examples/14_batches_and_half_precision.cpp
void how_attention_learns(); // examples/15_how_attention_learns.cpp
void flash_backward();       // examples/16_flash_attention_backward.cpp
}  // namespace qkv::cli::walkthroughs

namespace qkv::io {
class page;
}

// the examples' learner's pages (qkv explain NAME --html FILE): each fills `p` and returns true,
// or returns false when the example has no page() yet
namespace qkv::cli::pages {
bool illustrated(qkv::io::page& p);
bool illustrated_exact(qkv::io::page& p);
bool from_scratch(qkv::io::page& p);
bool the_math(qkv::io::page& p);
bool the_math_exact(qkv::io::page& p);
bool bert(qkv::io::page& p);
bool statquest(qkv::io::page& p);
bool masking(qkv::io::page& p);
bool positional_encoding(qkv::io::page& p);
bool encoder_layer(qkv::io::page& p);
bool flash(qkv::io::page& p);
bool kv_cache(qkv::io::page& p);
bool grouped_query(qkv::io::page& p);
bool rope(qkv::io::page& p);
bool alibi(qkv::io::page& p);
bool batches(qkv::io::page& p);
bool how_attention_learns(qkv::io::page& p);
bool flash_backward(qkv::io::page& p);
}  // namespace qkv::cli::pages

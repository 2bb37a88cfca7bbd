// commands.hpp: the tool's commands, as qkv.cpp dispatches to them. Each is defined in its own
// file, tools/cmd_NAME.cpp (with the header cmd_NAME.hpp holding its parts, which the fuzz
// targets call too), and compiled once into the library qkv_commands (tools/meson.build).
#pragma once

#include "cli.hpp"

namespace qkv::cli {
int cmd_attend(const args& a);    // qkv attend CASE.json ...    (cmd_attend.cpp)
int cmd_decode(const args& a);    // qkv decode CASE.json ...    (cmd_decode.cpp)
int cmd_encode(const args& a);    // qkv encode CASE.json ...    (cmd_encode.cpp)
int cmd_explain(const args& a);   // qkv explain EXAMPLE ...     (cmd_explain.cpp)
int cmd_tokenize(const args& a);  // qkv tokenize TEXT ...       (cmd_tokenize.cpp)
int cmd_torch(const args& a);     // qkv torch --seed S OP...    (cmd_torch.cpp)
int cmd_train(const args& a);     // qkv train TASK ...          (cmd_train.cpp)
}  // namespace qkv::cli

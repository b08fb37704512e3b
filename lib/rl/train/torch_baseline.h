// The python3-torch baseline of rl-profile decode: tests/reference/decode_reference.py (a plain
// batched KV-cache decode loop and a GRPO step in python3-torch, built on the independent model
// reference tests/reference/hf_reference.py) run over a Hugging Face model directory, so that our
// figures can be set beside torch's on the same weights, in the same run.
//
// The interpreter is $RL_PYTHON when set (and then only it), else the first of python3 and
// /usr/bin/python3 (Debian's python3-torch) that imports torch. The script is looked up in the
// source tree rl-profile was built from (RL_REFERENCE_DIR, set by CMake).
// Thread safety: runs a child process on the calling thread; its stderr (progress) is ours.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::train {

// The interpreter that will run the baseline, or Unavailable saying why there is none.
Result<std::string> TorchPython();

// Runs the baseline over `model_dir` with `spec` (the SPEC of decode_reference.py, written to a
// file beside it in `work_dir`) and returns the JSON objects it printed, in order. Unavailable
// when there is no python3 with torch or no script; Internal when the script fails or prints
// something that is not JSON.
Result<std::vector<nlohmann::json>> RunTorchBaseline(const std::string& model_dir, const nlohmann::json& spec,
                                                     const std::string& work_dir);

}  // namespace rl::train

#pragma once
// What a process that runs a model (rl-train, rl-rollout, rl-profile) sets before anything else.

namespace rl {

// Two settings that decide how fast libtorch runs on a few shared cores:
//  - OMP_WAIT_POLICY=PASSIVE unless the environment says otherwise: idle OpenMP threads sleep
//    instead of spinning on the cores the other roles need. OpenMP reads it once at start-up, so
//    the process re-executes itself with it set (on failure it goes on with the active policy).
//  - glibc malloc keeps freed memory instead of returning it to the kernel. A model with a real
//    vocabulary makes tensors of tens of MB every step (logits of 64 rows x 151936 tokens: 39 MB);
//    glibc serves those with a fresh mmap and unmaps them on free, so every step faults in and
//    zeroes them again: half the time of a GRPO step on Qwen3's vocabulary went to the kernel.
//    With mmap off and trimming off, freed blocks are reused. The environment carries the setting
//    to child processes (MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_); set either of those, or a
//    glibc.malloc tunable in GLIBC_TUNABLES, to keep a choice of your own.
void PrepareComputeProcess(char** argv);

}  // namespace rl

#include "rl/dist/adaptive_merge.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "rl/core/clock.h"
#include "rl/model/device.h"

namespace rl::dist {
namespace {

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Pads t along dim to `size` with zeros.
at::Tensor PadTo(const at::Tensor& t, int64_t dim, int64_t size) {
  if (t.size(dim) == size) return t.contiguous();
  std::vector<int64_t> shape = t.sizes().vec();
  shape[static_cast<size_t>(dim)] = size;
  at::Tensor out = at::zeros(shape, t.options());
  out.narrow(dim, 0, t.size(dim)).copy_(t);
  return out;
}

}  // namespace

// Moves the unfinished sequences of the replicas of degree `from` into those of degree `to`,
// wider (merging them) or narrower (splitting them): `place[k][i]` is the new replica of old
// replica k's i-th sequence (MergeInto). Over the whole group, so that sequences may move between
// any replicas; this rank keeps the sequences of its new replica (rank / to) and, of their KV
// cache, the key/value heads its new shard holds, which the old replica's ranks holding them send
// (every rank of an old replica holds the same sequences; narrower, a new shard's heads come from
// several of them).
Status MoveSequences(Group& group, Replica::Exported mine, int from, int to, const std::vector<std::vector<int>>& place,
                     const model::ModelConfig& config, const c10::Device& device, bool recompute, Replica* merged,
                     SwitchRecord* record) {
  // A fail point for drills: RL_FAILPOINT=adaptive-switch stops this process (SIGSTOP) as the
  // switch begins, so that a test can kill it in the middle of one.
  if (const char* f = std::getenv("RL_FAILPOINT"); f != nullptr && std::strcmp(f, "adaptive-switch") == 0) {
    std::raise(SIGSTOP);
  }
  const int rank = group.rank(), target = rank / to;
  int64_t n_max = 1;
  for (const auto& p : place) n_max = std::max<int64_t>(n_max, static_cast<int64_t>(p.size()));
  Clock::time_point t = Clock::now();
  // Metadata: prompt, token count and generated count per sequence; tokens, logprobs, logits.
  int64_t len_max = 1;
  for (const SequenceState& s : mine.sequences) len_max = std::max<int64_t>(len_max, s.tokens.size());
  at::Tensor len_t = at::tensor(std::vector<int64_t>{len_max}, at::kLong);
  std::vector<at::Tensor> lens;
  RL_RETURN_IF_ERROR(group.AllGather(len_t, &lens));
  for (const at::Tensor& l : lens) len_max = std::max(len_max, l.item<int64_t>());
  const int64_t vocab = config.vocab_size;
  at::Tensor meta = at::zeros({n_max, 3}, at::kLong), tokens = at::zeros({n_max, len_max}, at::kLong);
  at::Tensor logprobs = at::zeros({n_max, len_max}, at::kFloat), logits = at::zeros({n_max, vocab}, at::kFloat);
  for (size_t i = 0; i < mine.sequences.size(); ++i) {
    const SequenceState& s = mine.sequences[i];
    const auto row = static_cast<int64_t>(i);
    const auto len = static_cast<int64_t>(s.tokens.size());
    const auto gen = static_cast<int64_t>(s.generation.response_ids.size());
    meta[row][0] = s.prompt;
    meta[row][1] = len;
    meta[row][2] = gen;
    tokens[row].narrow(0, 0, len).copy_(at::tensor(s.tokens, at::kLong));
    logprobs[row].narrow(0, 0, gen).copy_(at::tensor(s.generation.logprobs, at::kFloat));
    logits[row].copy_(s.logits);
  }
  std::vector<at::Tensor> metas, all_tokens, all_logprobs, all_logits, all_routes;
  RL_RETURN_IF_ERROR(group.AllGather(meta, &metas));
  RL_RETURN_IF_ERROR(group.AllGather(tokens, &all_tokens));
  RL_RETURN_IF_ERROR(group.AllGather(logprobs, &all_logprobs));
  RL_RETURN_IF_ERROR(group.AllGather(logits, &all_logits));
  // Recorded routes, those of every token in the cache: [n, len_max * per_token]. A recomputed
  // sequence records its own again (Replica::RecomputeActive), so they travel only with the cache.
  const int64_t per_token = config.SparseLayerCount() * config.moe.num_experts_per_tok;
  const bool routes = !recompute && merged->records_routes();
  if (routes) {
    at::Tensor mine_routes = at::zeros({n_max, len_max * per_token}, at::kInt);
    bool covered = true;  // checked after the gather, which every rank must join
    for (size_t i = 0; i < mine.sequences.size(); ++i) {
      const std::vector<int32_t>& r = mine.sequences[i].generation.routes;
      if (static_cast<int64_t>(r.size()) != static_cast<int64_t>(mine.sequences[i].tokens.size()) * per_token) {
        covered = false;
        continue;
      }
      if (!r.empty()) mine_routes[static_cast<int64_t>(i)].narrow(0, 0, static_cast<int64_t>(r.size())).copy_(at::tensor(r, at::kInt));
    }
    RL_RETURN_IF_ERROR(group.AllGather(mine_routes, &all_routes));
    if (!covered) return Status::Internal("adaptive switch: a sequence's routes do not cover its tokens");
  }
  // This rank's new replica's sequences, old replica by old replica, each from the old replica's
  // first rank.
  std::vector<std::pair<size_t, int64_t>> sources;  // (sending rank, row)
  std::vector<SequenceState> sequences;
  for (size_t k = 0; k < place.size(); ++k) {
    const size_t src = k * static_cast<size_t>(from);
    for (size_t i = 0; i < place[k].size(); ++i) {
      if (place[k][i] != target) continue;
      const auto row = static_cast<int64_t>(i);
      sources.emplace_back(src, row);
      SequenceState s;
      const int64_t* m = metas[src][row].data_ptr<int64_t>();
      s.prompt = m[0];
      const at::Tensor tk = all_tokens[src][row].narrow(0, 0, m[1]).contiguous();
      s.tokens.assign(tk.data_ptr<int64_t>(), tk.data_ptr<int64_t>() + m[1]);
      s.generation.response_ids.assign(s.tokens.end() - m[2], s.tokens.end());
      const at::Tensor lp = all_logprobs[src][row].narrow(0, 0, m[2]).contiguous();
      s.generation.logprobs.assign(lp.data_ptr<float>(), lp.data_ptr<float>() + m[2]);
      s.logits = all_logits[src][row].to(device, /*non_blocking=*/false, /*copy=*/true);
      if (routes) {
        const at::Tensor r = all_routes[src][row].narrow(0, 0, m[1] * per_token).contiguous();
        s.generation.routes.assign(r.data_ptr<int32_t>(), r.data_ptr<int32_t>() + r.numel());
      }
      sequences.push_back(std::move(s));
    }
  }
  record->other_s += Since(t);
  t = Clock::now();
  if (recompute) {
    RL_RETURN_IF_ERROR(merged->RecomputeActive(std::move(sequences)));
    model::Synchronize(device);  // the prefills' kernels, on a GPU
    record->state_s = Since(t);
    return Status::OK();
  }
  // The KV cache, layer by layer: gather every rank's valid entries, keep this rank's new heads.
  // They are [first, first + heads) of the whole model's; at degree `from` the old replica's rank
  // h / old_heads held head h, at offset h % old_heads of its own: spans of (holder, offset, heads).
  const int64_t heads = config.kv_heads() / to, first = heads * (rank % to);
  const int64_t old_heads = config.kv_heads() / from;
  struct Span {
    int64_t holder, offset, heads;
  };
  std::vector<Span> spans;
  for (int64_t h = first; h < first + heads;) {
    const Span span{h / old_heads, h % old_heads, std::min(old_heads - h % old_heads, first + heads - h)};
    spans.push_back(span);
    h += span.heads;
  }
  std::vector<at::Tensor> keys, values;
  for (size_t l = 0; l < mine.keys.size(); ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      const at::Tensor& local = kv == 0 ? mine.keys[l] : mine.values[l];
      // In float32 (c10d's Gloo does not take bfloat16; the round trip is exact); PutActive
      // converts back to the cache's dtype.
      at::Tensor padded = PadTo(PadTo(local, 0, n_max), 2, len_max).to(at::kFloat);
      std::vector<at::Tensor> parts;
      RL_RETURN_IF_ERROR(group.AllGather(padded, &parts));
      std::vector<at::Tensor> kept;
      for (const auto& [src, row] : sources) {
        std::vector<at::Tensor> pieces;
        for (const Span& span : spans) {
          pieces.push_back(parts[src + static_cast<size_t>(span.holder)].narrow(0, row, 1).narrow(1, span.offset, span.heads));
        }
        kept.push_back(pieces.size() == 1 ? pieces[0] : at::cat(pieces, 1));
      }
      std::vector<int64_t> none = padded.sizes().vec();
      none[0] = 0;
      none[1] = heads;
      (kv == 0 ? keys : values).push_back(kept.empty() ? at::zeros(none, padded.options()) : at::cat(kept, 0));
    }
  }
  RL_RETURN_IF_ERROR(merged->PutActive(std::move(sequences), keys, values));
  model::Synchronize(device);  // the copies into the new cache, on a GPU
  record->state_s = Since(t);
  return Status::OK();
}

}  // namespace rl::dist

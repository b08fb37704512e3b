#include "rl/model/decoder.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <map>

#include "rl/model/tensor_parallel.h"
#include "rl/model/torch_guard.h"

namespace rl::model {
namespace {

at::Tensor IdsTensor(const std::vector<int64_t>& ids) { return at::tensor(ids, at::kLong); }

class CacheDecoder final : public Decoder {
 public:
  CacheDecoder(const Transformer* model, KvCache cache) : model_(model), cache_(std::move(cache)) {}

  // Prefills prompts of equal length together; rows come back in the order of `slots`.
  Result<at::Tensor> Start(const std::vector<int64_t>& slots,
                           const std::vector<const std::vector<int64_t>*>& prompts,
                           std::vector<at::Tensor>* routes) override {
    if (routes != nullptr) routes->assign(slots.size(), at::Tensor());
    std::map<size_t, std::vector<size_t>> by_length;  // prompt length -> indices into slots
    for (size_t i = 0; i < slots.size(); ++i) {
      RL_RETURN_IF_ERROR(cache_.Reset(slots[i]));
      by_length[prompts[i]->size()].push_back(i);
    }
    std::vector<at::Tensor> rows(slots.size());
    for (const auto& [length, members] : by_length) {
      std::vector<int64_t> group_slots, flat;
      for (size_t i : members) {
        group_slots.push_back(slots[i]);
        flat.insert(flat.end(), prompts[i]->begin(), prompts[i]->end());
      }
      const at::Tensor tokens = IdsTensor(flat).view(
          {static_cast<int64_t>(members.size()), static_cast<int64_t>(length)});
      ++forward_calls_;
      at::Tensor used;
      Routes record;
      if (routes != nullptr) record.record = &used;
      RL_ASSIGN_OR_RETURN(at::Tensor logits,
                          model_->ForwardStep(tokens, group_slots, &cache_, /*last_only=*/true, record));
      for (size_t j = 0; j < members.size(); ++j) {
        rows[members[j]] = logits[static_cast<int64_t>(j)][-1];
        if (routes != nullptr) (*routes)[members[j]] = used[static_cast<int64_t>(j)];
      }
    }
    return TorchGuard("decoder: start", [&]() -> Result<at::Tensor> { return at::stack(rows); });
  }

  Result<at::Tensor> Step(const std::vector<int64_t>& slots, const std::vector<int64_t>& tokens,
                          std::vector<at::Tensor>* routes) override {
    ++forward_calls_;
    at::Tensor used;
    Routes record;
    if (routes != nullptr) record.record = &used;
    RL_ASSIGN_OR_RETURN(at::Tensor logits,
                        model_->ForwardStep(IdsTensor(tokens).unsqueeze(1), slots, &cache_, false, record));
    if (routes != nullptr) {
      routes->clear();
      for (int64_t i = 0; i < used.size(0); ++i) routes->push_back(used[i]);
    }
    return TorchGuard("decoder: step", [&]() -> Result<at::Tensor> { return logits.select(1, 0); });
  }

 private:
  const Transformer* model_;
  KvCache cache_;
};

class FullDecoder final : public Decoder {
 public:
  FullDecoder(const Transformer* model, int64_t slots)
      : model_(model), seqs_(static_cast<size_t>(slots)) {}

  Result<at::Tensor> Start(const std::vector<int64_t>& slots,
                           const std::vector<const std::vector<int64_t>*>& prompts,
                           std::vector<at::Tensor>* routes) override {
    for (size_t i = 0; i < slots.size(); ++i) seqs_[static_cast<size_t>(slots[i])] = *prompts[i];
    return Logits(slots, routes, /*fed_last=*/false);
  }

  Result<at::Tensor> Step(const std::vector<int64_t>& slots, const std::vector<int64_t>& tokens,
                          std::vector<at::Tensor>* routes) override {
    for (size_t i = 0; i < slots.size(); ++i)
      seqs_[static_cast<size_t>(slots[i])].push_back(tokens[i]);
    return Logits(slots, routes, /*fed_last=*/true);
  }

 private:
  // One forward pass over the slots' sequences, right-padded with token 0 (causal attention keeps
  // the padding out of every real position), read at each sequence's last position. Routes: of
  // the whole sequence, or of its last token only when that is all this call fed (fed_last).
  Result<at::Tensor> Logits(const std::vector<int64_t>& slots, std::vector<at::Tensor>* routes, bool fed_last) {
    size_t longest = 0;
    for (int64_t s : slots) longest = std::max(longest, seqs_[static_cast<size_t>(s)].size());
    std::vector<int64_t> flat(slots.size() * longest, 0), last;
    for (size_t i = 0; i < slots.size(); ++i) {
      const auto& seq = seqs_[static_cast<size_t>(slots[i])];
      std::copy(seq.begin(), seq.end(), flat.begin() + static_cast<std::ptrdiff_t>(i * longest));
      last.push_back(static_cast<int64_t>(seq.size()) - 1);
    }
    c10::NoGradGuard no_grad;
    ++forward_calls_;
    at::Tensor used;
    Routes record;
    if (routes != nullptr) record.record = &used;
    RL_ASSIGN_OR_RETURN(at::Tensor logits,
                        model_->Forward(IdsTensor(flat).view(
                            {static_cast<int64_t>(slots.size()), static_cast<int64_t>(longest)}), record));
    if (routes != nullptr) {
      routes->clear();
      for (size_t i = 0; i < slots.size(); ++i) {
        const int64_t n = last[i] + 1, first = fed_last ? last[i] : 0;
        routes->push_back(used[static_cast<int64_t>(i)].narrow(0, first, n - first));
      }
    }
    return TorchGuard("decoder: gather", [&]() -> Result<at::Tensor> {
      const at::Tensor index =
          IdsTensor(last).to(logits.device()).view({-1, 1, 1}).expand({-1, 1, logits.size(2)});
      return logits.gather(1, index).squeeze(1);
    });
  }

  const Transformer* model_;
  std::vector<std::vector<int64_t>> seqs_;
};

}  // namespace

Result<std::unique_ptr<Decoder>> NewCacheDecoder(const Transformer* model, int64_t slots) {
  RL_ASSIGN_OR_RETURN(KvCache cache, KvCache::Create(model->config(), slots, model->dtype(),
                                                     model->tensor_parallel().size, model->device()));
  return std::unique_ptr<Decoder>(new CacheDecoder(model, std::move(cache)));
}

Result<std::unique_ptr<Decoder>> NewFullDecoder(const Transformer* model, int64_t slots) {
  if (slots < 1) return Status::InvalidArgument("decoder: slots must be >= 1");
  return std::unique_ptr<Decoder>(new FullDecoder(model, slots));
}

}  // namespace rl::model

#include "rl/model/device.h"

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

#ifdef RL_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif


namespace rl::model {

Result<c10::Device> ParseDevice(const std::string& name) {
  if (name == "cpu") return c10::Device(c10::kCPU);
  if (name == "cuda") return c10::Device(c10::kCUDA, 0);
  const std::string prefix = "cuda:";
  if (name.size() > prefix.size() && name.size() <= prefix.size() + 3 && name.compare(0, prefix.size(), prefix) == 0) {
    int index = 0;
    for (size_t i = prefix.size(); i < name.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(name[i]))) return Status::InvalidArgument("not cpu, cuda or cuda:N");
      index = index * 10 + (name[i] - '0');
    }
    if (index > 127) return Status::InvalidArgument("a CUDA device index is at most 127");  // c10's int8 index
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  return Status::InvalidArgument("not cpu, cuda or cuda:N");
}

std::string DeviceName(const c10::Device& device) {
  if (device.is_cpu()) return "cpu";
  return "cuda:" + std::to_string(device.has_index() ? device.index() : 0);
}

Status CheckDevice(const c10::Device& device) {
  if (device.is_cpu()) return Status::OK();
  if (!device.is_cuda()) return Status::InvalidArgument("only cpu and cuda devices are supported");
  if (!torch::cuda::is_available()) {
#ifdef RL_WITH_CUDA
    return Status::Unavailable("no CUDA device is visible (driver, CUDA_VISIBLE_DEVICES)");
#else
    return Status::Unavailable("this build has no CUDA (configure with -DRL_WITH_CUDA=ON against a CUDA libtorch)");
#endif
  }
  const auto count = static_cast<int64_t>(torch::cuda::device_count());
  const int64_t index = device.has_index() ? device.index() : 0;
  if (index >= count) {
    return Status::Unavailable("there are " + std::to_string(count) + " CUDA devices (0.." +
                               std::to_string(count - 1) + ")");
  }
  return Status::OK();
}

Result<c10::Device> OpenDevice(const std::string& name) {
  auto device = ParseDevice(name);
  if (!device.ok()) return Status::InvalidArgument("--device " + name + ": " + device.status().message());
  RL_RETURN_IF_ERROR(CheckDevice(*device).WithContext("--device " + name));
  return *device;
}

Result<c10::Device> OpenRankDevice(const std::string& name, int local_rank) {
  RL_ASSIGN_OR_RETURN(c10::Device device, OpenDevice(name));
  if (name != "cuda" || local_rank < 1) return device;
  const int visible = static_cast<int>(torch::cuda::device_count());  // >= 1: OpenDevice checked
  const int index = local_rank % std::max(visible, 1);
  if (index != local_rank) {
    spdlog::info("local rank {} sees {} GPU(s): --device cuda is cuda:{}{}", local_rank, visible, index,
                 visible > 1 ? ", shared with other ranks" : "");
  }
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(std::min(index, 127)));
}

at::Tensor HostCopy(const at::Tensor& t) {
  if (t.is_cpu()) return t.detach().clone();
  at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
  host.copy_(t.detach());  // blocking: the copy is complete on return
  return host;
}

void Synchronize(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

std::optional<int64_t> PeakDeviceBytes(const c10::Device& device) {
#ifdef RL_WITH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return static_cast<int64_t>(stats.allocated_bytes[0].peak);  // [0]: StatType::AGGREGATE
  }
#endif
  return std::nullopt;
}

void ResetPeakDeviceBytes(const c10::Device& device) {
#ifdef RL_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
}

}  // namespace rl::model

// fragless under LibTorch: installs fragless as c10's CUDA allocator, trains a few steps of a
// small model on the GPU and prints torch's own memory figures, which now come from fragless.
// The model uses elementwise layers and layer norms only, so it also runs where cuBLAS and
// cuDNN are unavailable (simcuda: kernels are accepted and do nothing, allocations are real).
#include <torch/torch.h>

#include <c10/cuda/CUDACachingAllocator.h>

#include <cstdio>
#include <exception>

#include "fragless/fragless.hpp"
#include "fragless/torch.hpp"

namespace {

struct elementwise_block : torch::nn::Module {
  explicit elementwise_block(int64_t width)
      : scale(register_parameter("scale", torch::ones({width}))),
        shift(register_parameter("shift", torch::zeros({width}))),
        norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))) {}

  torch::Tensor forward(const torch::Tensor& input) { return torch::relu(norm(input * scale + shift)); }

  torch::Tensor scale;
  torch::Tensor shift;
  torch::nn::LayerNorm norm;
};

}  // namespace

int main() {
  try {
    fragless::torch::install();  // before the first CUDA allocation
    if (!torch::cuda::is_available()) {
      std::fprintf(stderr, "torch_example: no CUDA device\n");
      return 1;
    }
    const torch::Device device(torch::kCUDA, 0);
    auto first = std::make_shared<elementwise_block>(512);
    auto second = std::make_shared<elementwise_block>(512);
    first->to(device);
    second->to(device);
    std::vector<torch::Tensor> parameters = first->parameters();
    for (const auto& parameter : second->parameters()) parameters.push_back(parameter);
    torch::optim::Adam optimizer(parameters, torch::optim::AdamOptions(1e-3));

    for (int step = 0; step < 5; ++step) {
      optimizer.zero_grad();
      const torch::Tensor batch = torch::randn({128, 512}, device);
      torch::Tensor loss = second->forward(first->forward(batch)).sum();
      loss.backward();
      optimizer.step();
    }
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
    std::printf("allocator: %s\n", c10::cuda::CUDACachingAllocator::get()->name().c_str());
    std::printf("allocations served: %lld, peak allocated bytes: %lld\n",
                static_cast<long long>(stats.allocation[0].allocated),
                static_cast<long long>(stats.allocated_bytes[0].peak));
    std::printf("%s\n", fragless::memory_summary(0).c_str());
    return stats.allocation[0].allocated > 0 ? 0 : 1;
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "torch_example: %s\n", failure.what());
    return 1;
  }
}

// rl-train export: a model file and a trainer checkpoint written as HF directories, reloaded by
// LoadHfModel (logits equal bit for bit in float32) and read by tests/reference/hf_reference.py,
// an independent float64 implementation in python3-torch (skipped without it): other tools load
// what we export.
#include "rl/train/export.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rl/core/fs.h"
#include "rl/model/hf_dir.h"
#include "rl/model/hf_reference.h"
#include "rl/model/test_util.h"
#include "rl/train/checkpoint.h"

namespace rl::train {
namespace {

namespace fs = std::filesystem;
using model::testing::TinyConfig;

const std::vector<int64_t> kIds = {1, 4, 5, 13, 6, 7, 14, 3, 12, 9, 2, 0, 11};

const std::string kRoot = ::testing::TempDir() + "/export_test." + std::to_string(::getpid());

// Removes the tests' directories when the binary ends.
struct RemoveRoot : ::testing::Environment {
  void TearDown() override { fs::remove_all(kRoot); }
};
const auto* const kRemoveRoot = ::testing::AddGlobalTestEnvironment(new RemoveRoot);

std::string TempDir(const std::string& what) {
  std::string d = kRoot + "/" + what;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

at::Tensor Logits(const model::Transformer& m) {
  auto out = m.Forward(at::tensor(kIds, at::kLong).unsqueeze(0));
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? out->squeeze(0) : at::Tensor();
}

model::Transformer RandomModel(const model::ModelConfig& config, uint64_t seed) {
  auto m = model::Transformer::Create(config, seed);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  model::testing::RandomizeWeights(&*m, seed);
  return std::move(*m);
}

// Exports `file` to `out` and checks the directory reloads with the logits of the file's model.
ExportReport ExportAndCompare(const std::string& file, const std::string& out) {
  auto loaded = LoadAnyModelFile(file);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExportOptions o;
  o.out = out;
  auto report = ExportHfDir(*loaded, o);
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  auto hf = model::LoadHfModel(out);
  EXPECT_TRUE(hf.ok()) << hf.status().ToString();
  EXPECT_TRUE(at::equal(Logits(loaded->model), Logits(*hf)));
  return report.ok() ? *report : ExportReport();
}

TEST(ExportTest, ModelFileReloadsFromTheDirectoryWithIdenticalLogits) {
  const std::string dir = TempDir("model");
  model::Transformer m = RandomModel(TinyConfig(model::Architecture::kQwen3, false, 2), 3);
  ASSERT_TRUE(model::SaveModelFile(dir + "/weights-7.safetensors", m, 7).ok());
  ExportReport r = ExportAndCompare(dir + "/weights-7.safetensors", dir + "/hf");
  EXPECT_EQ(r.version, 7u);
  EXPECT_EQ(r.files, (std::vector<std::string>{"config.json", "model.safetensors"}));
  int64_t n = 0;
  for (const at::Tensor& p : m.Parameters()) n += p.numel();
  EXPECT_EQ(r.parameters, n);
  // and the model of the file is the model we saved
  auto back = model::LoadModelFile(dir + "/weights-7.safetensors");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(at::equal(Logits(m), Logits(back->model)));
}

TEST(ExportTest, CheckpointExportsItsPolicyWithIdenticalLogits) {
  const std::string dir = TempDir("checkpoint");
  model::Transformer m = RandomModel(TinyConfig(model::Architecture::kLlama, true, 2), 4);
  Checkpoint c;
  c.step = 12;
  c.version = 5;
  auto copy = m.Clone();
  ASSERT_TRUE(copy.ok());
  c.model = std::move(*copy);
  for (auto& [name, p] : m.NamedParameters()) c.adam.emplace_back("m." + name, at::ones_like(p));
  auto bytes = EncodeCheckpoint(c);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  ASSERT_TRUE(WriteFileAtomic(CheckpointPath(dir, 12), *bytes).ok());
  ExportReport r = ExportAndCompare(CheckpointPath(dir, 12), dir + "/hf");
  EXPECT_EQ(r.version, 5u);
  auto hf = model::LoadHfModel(dir + "/hf");
  ASSERT_TRUE(hf.ok());
  EXPECT_TRUE(at::equal(Logits(m), Logits(*hf)));  // the policy, not the Adam moments
}

TEST(ExportTest, CopiesTokenizerFilesAndWritesTheChosenDtype) {
  const std::string dir = TempDir("tokenizer");
  model::Transformer m = RandomModel(TinyConfig(), 5);
  const std::string tok = dir + "/tok";
  fs::create_directories(tok);
  std::ofstream(tok + "/tokenizer.json") << "{\"model\": {}}";
  std::ofstream(tok + "/tokenizer_config.json") << "{}";
  ExportOptions o;
  o.out = dir + "/hf";
  o.tokenizer_from = tok;
  o.dtype = model::DType::kBF16;
  auto r = ExportHfDir(model::LoadedModel{std::move(m), 2}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files, (std::vector<std::string>{"config.json", "model.safetensors", "tokenizer.json",
                                                "tokenizer_config.json"}));
  auto config = model::ReadHfConfig(o.out);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->torch_dtype, model::DType::kBF16);
  EXPECT_EQ(*ReadFile(o.out + "/tokenizer.json"), "{\"model\": {}}");
}

TEST(ExportTest, RefusesToReplaceADirectoryThatIsNoModelAndATokenizerDirWithoutTokenizerJson) {
  const std::string dir = TempDir("refuse");
  fs::create_directories(dir + "/home");
  std::ofstream(dir + "/home/notes.txt") << "keep me";
  ExportOptions o;
  o.out = dir + "/home";
  auto r = ExportHfDir(model::LoadedModel{RandomModel(TinyConfig(), 6), 1}, o);
  EXPECT_EQ(r.status().code(), Code::kIOError);
  EXPECT_EQ(*ReadFile(dir + "/home/notes.txt"), "keep me");
  o.out = dir + "/hf";
  o.tokenizer_from = dir + "/home";
  r = ExportHfDir(model::LoadedModel{RandomModel(TinyConfig(), 6), 1}, o);
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("tokenizer.json"), std::string::npos);
  EXPECT_FALSE(fs::exists(o.out));
}

TEST(ExportTest, TruncatedFileIsCorruptionNamingTheFile) {
  const std::string dir = TempDir("truncated");
  auto bytes = model::EncodeModel(RandomModel(TinyConfig(), 7), 1);
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/w.safetensors", bytes->substr(0, bytes->size() / 2)).ok());
  auto r = LoadAnyModelFile(dir + "/w.safetensors");
  EXPECT_EQ(r.status().code(), Code::kCorruption);
  EXPECT_EQ(r.status().message().rfind(dir + "/w.safetensors: ", 0), 0u) << r.status().ToString();
}

TEST(ExportTest, TheIndependentReferenceReadsExportedDirectories) {
  if (model::testing::TorchPython().empty()) GTEST_SKIP() << "no python3 with torch: reference not run";
  const std::string dir = TempDir("reference");
  model::Transformer m = RandomModel(TinyConfig(model::Architecture::kQwen2, true, 1), 8);
  ASSERT_TRUE(model::SaveModelFile(dir + "/weights-3.safetensors", m, 3).ok());
  Checkpoint c;
  c.version = 4;
  c.model = RandomModel(TinyConfig(model::Architecture::kLlama, false, 2), 9);
  const at::Tensor from_checkpoint = Logits(*c.model);
  auto bytes = EncodeCheckpoint(c);
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(WriteFileAtomic(CheckpointPath(dir, 1), *bytes).ok());
  const std::vector<std::pair<std::string, at::Tensor>> cases = {
      {dir + "/weights-3.safetensors", Logits(m)}, {CheckpointPath(dir, 1), from_checkpoint}};
  int i = 0;
  for (const auto& [file, ours] : cases) {
    SCOPED_TRACE(file);
    const std::string out = dir + "/hf" + std::to_string(i++);
    ExportAndCompare(file, out);
    const at::Tensor reference = model::testing::ReferenceLogits(out, kIds);
    ASSERT_TRUE(reference.defined()) << "the reference script failed on " << out;
    ASSERT_EQ(reference.sizes(), ours.sizes());
    EXPECT_LT((ours.to(at::kDouble) - reference).abs().max().item<double>(), 1e-4);
    EXPECT_GT(reference.abs().max().item<double>(), 1.0);  // weights large enough to matter
  }
}

}  // namespace
}  // namespace rl::train

#include "rl/queue/record.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "rl/queue/protocol.h"
#include "rl/queue/wal.h"

namespace rl::queue {
namespace {

// A put of new rows decoded the way the server decodes one, with the sources of its values.
struct DecodedPut {
  std::shared_ptr<std::string> body;
  BorrowedBytes borrowed;
  Record record;
};

DecodedPut DecodeRows(const std::vector<std::string>& values) {
  DecodedPut d;
  d.body = std::make_shared<std::string>(EncodePutColumn("payload", values));
  auto put = DecodePut(*d.body, {}, &d.borrowed);
  EXPECT_TRUE(put.ok()) << put.status().ToString();
  d.borrowed.hold = d.body;
  d.record.type = RecordType::kPut;
  d.record.sender = "s";
  d.record.rid = 7;
  for (size_t i = 0; i < put->rows.size(); ++i) {
    d.record.rows.push_back({i, true, std::move(put->rows[i].columns)});
    d.record.indices.push_back(i);
  }
  return d;
}

std::string Joined(const WalPayload& p) {
  if (p.pieces.empty()) return std::string(p.data.get(), p.size);
  std::string out;
  for (std::string_view piece : p.pieces) out.append(piece);
  return out;
}

TEST(RecordTest, PayloadWithBorrowedValuesHasTheBytesOfTheCopiedOne) {
  DecodedPut d = DecodeRows({std::string(5000, 'a'), "small", std::string(kBorrowBytes, 'c'), ""});
  EXPECT_EQ(d.borrowed.sources.size(), 2u);
  WalPayload p = EncodeRecordPayload(d.record, &d.borrowed);
  EXPECT_FALSE(p.pieces.empty());
  EXPECT_EQ(p.hold, d.borrowed.hold);
  std::string bytes = Joined(p);
  EXPECT_EQ(bytes.size(), p.size);
  EXPECT_EQ(bytes, EncodeRecord(d.record));
}

TEST(RecordTest, ValuesNotFromTheFrameAreCopied) {
  DecodedPut d = DecodeRows({std::string(5000, 'a')});
  std::get<Bytes>(d.record.rows[0].columns[0].second).data = std::string(5000, 'z');  // elsewhere now
  WalPayload p = EncodeRecordPayload(d.record, &d.borrowed);
  EXPECT_TRUE(p.pieces.empty());
  EXPECT_EQ(Joined(p), EncodeRecord(d.record));
}

TEST(WalTest, RecordsOfPiecesReadBackWhole) {
  std::string path = ::testing::TempDir() + "/rl-wal-pieces-" + std::to_string(::getpid()) + ".log";
  std::filesystem::remove(path);
  DecodedPut d = DecodeRows({std::string(70000, 'a'), std::string(3000, 'b')});
  std::string expected = EncodeRecord(d.record);
  {
    auto w = WalWriter::Open(path, 0);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    (*w)->Append("first");
    (*w)->Append(EncodeRecordPayload(d.record, &d.borrowed));
    (*w)->Append("last");
    ASSERT_TRUE((*w)->Sync().ok());
  }
  std::vector<std::string> got;
  WalScan scan;
  ASSERT_TRUE(ReadWal(path, [&](const char* p, size_t n) {
                got.emplace_back(p, n);
                return Status::OK();
              }, &scan).ok());
  EXPECT_TRUE(scan.tail_error.empty()) << scan.tail_error;
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], "first");
  EXPECT_EQ(got[1], expected);
  EXPECT_EQ(got[2], "last");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace rl::queue

#include "rl/queue/record.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "rl/queue/protocol.h"
#include "rl/queue/wal.h"

namespace rl::queue {
namespace {

// A put of new rows decoded the way the server decodes one: large values lent by the body.
struct DecodedPut {
  std::shared_ptr<std::string> body;
  Record record;
};

DecodedPut DecodeRows(const std::vector<std::string>& values, bool lend = true) {
  DecodedPut d;
  d.body = std::make_shared<std::string>(EncodePutColumn("payload", values));
  auto put = DecodePutCommand(*d.body, {}, lend ? d.body : nullptr);
  EXPECT_TRUE(put.ok()) << put.status().ToString();
  d.record.type = RecordType::kPut;
  d.record.sender = "s";
  d.record.rid = 7;
  for (size_t i = 0; i < put->rows.size(); ++i) {
    put->rows[i].index = i;
    d.record.rows.push_back(std::move(put->rows[i]));
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

size_t LentCells(const Record& r) {
  size_t n = 0;
  for (const auto& row : r.rows) {
    for (const auto& [name, c] : row.columns) n += c.lent() ? 1 : 0;
  }
  return n;
}

TEST(RecordTest, PayloadWithLentValuesHasTheBytesOfTheCopiedOne) {
  DecodedPut d = DecodeRows({std::string(5000, 'a'), "small", std::string(kLendBytes, 'c'), ""});
  EXPECT_EQ(LentCells(d.record), 2u);
  WalPayload p = EncodeRecordPayload(d.record);
  EXPECT_FALSE(p.pieces.empty());
  ASSERT_EQ(p.holds.size(), 1u);
  EXPECT_EQ(p.holds[0], d.body);
  std::string bytes = Joined(p);
  EXPECT_EQ(bytes.size(), p.size);
  EXPECT_EQ(bytes, EncodeRecord(d.record));
}

TEST(RecordTest, ValuesDecodedWithoutAHoldAreCopied) {
  DecodedPut d = DecodeRows({std::string(5000, 'a')}, false);
  EXPECT_EQ(LentCells(d.record), 0u);
  WalPayload p = EncodeRecordPayload(d.record);
  EXPECT_TRUE(p.pieces.empty());
  EXPECT_TRUE(p.holds.empty());
  EXPECT_EQ(Joined(p), EncodeRecord(d.record));
}

TEST(RecordTest, ARecordWithLentValuesDecodesToEqualOwnedValues) {
  DecodedPut d = DecodeRows({std::string(3000, 'x'), "y"});
  std::string bytes = Joined(EncodeRecordPayload(d.record));
  auto back = DecodeRecord(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->rows.size(), 2u);
  EXPECT_EQ(LentCells(*back), 0u);
  EXPECT_EQ(back->rows[0].columns[0].second, d.record.rows[0].columns[0].second);
  EXPECT_EQ(back->rows[0].columns[0].second.ToValue(), Value(Bytes{std::string(3000, 'x')}));
}

// Logs are read by servers of other versions: a record writes "optional" and "freed" only where
// they say something, so every other record is the 17-key map servers before them wrote, and a
// record of that older form reads with their defaults.
TEST(RecordTest, RecordsWithoutTheNewFieldsKeepTheOlderFormAndTheOlderFormReads) {
  Record declare;
  declare.type = RecordType::kDeclare;
  declare.task = "t";
  declare.columns = {"x"};
  auto keys = [](const std::string& bytes) {
    auto oh = ParseMsgpack(bytes.data(), bytes.size());
    std::vector<std::string> out;
    const MapView record = MapView::Of(oh->get(), "record").value();  // not the temporary Result's: it dies first
    for (const auto& kv : record) out.push_back(AsString(kv.key, "key").value());
    return out;
  };
  std::vector<std::string> older = {"t",        "from",     "rid",  "task",    "lease", "deadline",
                                    "idx",      "dropped",  "regen", "rejected", "reserved", "takeover",
                                    "rows",     "columns",  "key",  "value",   "v"};
  EXPECT_EQ(keys(EncodeRecord(declare)), older);
  declare.optional = true;
  EXPECT_NE(keys(EncodeRecord(declare)), older);
  Record retire;
  retire.type = RecordType::kRetire;
  retire.task = "t";
  retire.freed = 3;
  auto retire_keys = keys(EncodeRecord(retire));
  EXPECT_NE(std::find(retire_keys.begin(), retire_keys.end(), "freed"), retire_keys.end());

  msgpack::sbuffer buf;  // a declare as a server before optional tasks logged it (the keys it needs)
  Packer pk(buf);
  pk.pack_map(3);
  PackString(pk, "t");
  pk.pack_uint8(6);
  PackString(pk, "task");
  PackString(pk, "old");
  PackString(pk, "columns");
  PackStringList(pk, {"x"});
  auto r = DecodeRecord(buf.data(), buf.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->type, RecordType::kDeclare);
  EXPECT_FALSE(r->optional);
  EXPECT_EQ(r->freed, 0u);
}

// A get's `also` and an update's task and lease are written only in records that have them, and
// read back; bytes that give them the wrong type are Corruption, never a crash.
TEST(RecordTest, AlsoAndUpdatesAreWrittenOnlyWhereTheySaySomethingAndCheckedWhenRead) {
  auto keys = [](const Record& r) {
    std::string bytes = EncodeRecord(r);
    auto oh = ParseMsgpack(bytes.data(), bytes.size());
    std::vector<std::string> out;
    const MapView record = MapView::Of(oh->get(), "record").value();  // not the temporary Result's: it dies first
    for (const auto& kv : record) out.push_back(AsString(kv.key, "key").value());
    return out;
  };
  auto has = [&](const Record& r, const char* key) {
    auto k = keys(r);
    return std::find(k.begin(), k.end(), key) != k.end();
  };
  Record lease;
  lease.type = RecordType::kLease;
  lease.task = "generate";
  lease.lease = 4;
  lease.indices = {1};
  EXPECT_EQ(keys(lease).size(), 17u);
  lease.also = {"progress", "turns"};
  EXPECT_TRUE(has(lease, "also"));
  EXPECT_FALSE(has(lease, "uniform") || has(lease, "uniform_sum"));
  lease.uniform = 4;
  lease.uniform_sum = 2.5;
  EXPECT_TRUE(has(lease, "uniform") && has(lease, "uniform_sum"));
  Record update;
  update.type = RecordType::kPut;
  update.indices = {1};
  update.rows.push_back({1, false, {{"progress", Cell(Value(std::string("t2")))}}});
  EXPECT_EQ(keys(update).size(), 17u);
  update.update_task = "generate";
  update.update_lease = 4;
  update.deadline_ms = 123456;
  EXPECT_TRUE(has(update, "update_task") && has(update, "update_lease"));
  for (const Record& r : {lease, update}) {
    std::string bytes = EncodeRecord(r);
    auto back = DecodeRecord(bytes.data(), bytes.size());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->also, r.also);
    EXPECT_EQ(back->update_task, r.update_task);
    EXPECT_EQ(back->update_lease, r.update_lease);
    EXPECT_EQ(back->deadline_ms, r.deadline_ms);
    EXPECT_EQ(back->uniform, r.uniform);
    EXPECT_EQ(back->uniform_sum, r.uniform_sum);
    EXPECT_EQ(EncodeRecord(*back), bytes);
  }
  auto with = [](const char* key, auto pack) {
    msgpack::sbuffer buf;
    Packer pk(buf);
    pk.pack_map(2);
    PackString(pk, "t");
    pk.pack_uint8(2);
    PackString(pk, key);
    pack(pk);
    return DecodeRecord(buf.data(), buf.size()).status().code();
  };
  EXPECT_EQ(with("also", [](Packer& pk) { pk.pack_uint8(1); }), Code::kCorruption);
  EXPECT_EQ(with("also", [](Packer& pk) { PackU64List(pk, {1}); }), Code::kCorruption);
  EXPECT_EQ(with("update_task", [](Packer& pk) { pk.pack_uint8(1); }), Code::kCorruption);
  EXPECT_EQ(with("update_lease", [](Packer& pk) { PackString(pk, "x"); }), Code::kCorruption);
  EXPECT_EQ(with("update_lease", [](Packer& pk) { pk.pack_int64(-1); }), Code::kCorruption);
  EXPECT_EQ(with("uniform_sum", [](Packer& pk) { PackString(pk, "x"); }), Code::kCorruption);
  EXPECT_EQ(with("uniform", [](Packer& pk) { pk.pack_double(1.5); }), Code::kCorruption);
}

// The server makes lists as long as the state: one get that drops every stale row of a queue of
// millions writes them all in one lease record. The wire's limit of 2^20 entries a container
// (which made such a record, and a snapshot of more rows, unreadable at recovery) does not apply
// to what the queue wrote itself.
TEST(RecordTest, ListsLongerThanTheWireAllowsReadBack) {
  Record r;
  r.type = RecordType::kLease;
  r.task = "train";
  r.lease = 3;
  for (uint64_t i = 0; i < (uint64_t{1} << 20) + 5; ++i) r.dropped.push_back(i * 3);
  const std::string bytes = EncodeRecord(r);
  EXPECT_FALSE(ParseMsgpack(bytes.data(), bytes.size()).ok()) << "the wire's limit";
  auto back = DecodeRecord(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->dropped, r.dropped);
}

TEST(CellTest, ALentCellIsEqualToAndPacksLikeItsValue) {
  auto hold = std::make_shared<std::string>(std::string(2048, 'q'));
  Tensor t{DType::kI32, {512}, *hold};
  const Value values[] = {Value(std::string(*hold)), Value(Bytes{*hold}), Value(t)};
  const Value shells[] = {Value(std::string()), Value(Bytes{}), Value(Tensor{DType::kI32, {512}, {}})};
  for (size_t i = 0; i < 3; ++i) {
    Cell lent = Cell::Lend(shells[i], *hold, hold);
    Cell owned(values[i]);
    EXPECT_TRUE(lent.lent());
    EXPECT_EQ(lent, owned);
    EXPECT_EQ(lent.MemoryBytes(), ValueBytes(values[i]));
    EXPECT_EQ(lent.ToValue(), values[i]);
    msgpack::sbuffer a, b;
    Packer pa(a), pb(b);
    PackCell(pa, lent, nullptr);
    PackValue(pb, values[i], nullptr);
    EXPECT_EQ(std::string(a.data(), a.size()), std::string(b.data(), b.size()));
  }
  EXPECT_NE(Cell::Lend(Value(Bytes{}), *hold, hold), Cell(Value(std::string(*hold))));
  EXPECT_NE(Cell::Lend(Value(Tensor{DType::kI32, {2, 256}, {}}), *hold, hold), Cell(Value(t)));
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
    (*w)->Append(EncodeRecordPayload(d.record));
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

#include "rl/queue/unit_ref.h"

#include <gtest/gtest.h>

#include "rl/queue/record.h"
#include "rl/queue/store.h"
#include "rl/queue/unit_protocol.h"

namespace rl::queue {
namespace {

std::string Packed(const Value& v, const UnitRef& ref) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  PackUnitRef(pk, v, ref);
  return std::string(buf.data(), buf.size());
}

Result<Cell> Unpacked(const std::string& bytes) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, ParseMsgpack(bytes.data(), bytes.size()));
  return UnpackUnitRef(oh.get());
}

Tensor Ids(size_t n) {
  std::vector<int64_t> v(n, 7);
  return Tensor::FromI64(v);
}

TEST(UnitRefTest, AReferenceDecodesToTheShellAndPlaceItWasPackedWith) {
  UnitRef ref{3, 12345, 1700000000000, 4000};
  auto c = Unpacked(Packed(Ids(500), ref));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->is_ref());
  EXPECT_EQ(c->ref(), ref);
  const auto& t = std::get<Tensor>(c->value());
  EXPECT_EQ(t.dtype, DType::kI64);
  EXPECT_EQ(t.shape, std::vector<int64_t>{500});
  EXPECT_TRUE(t.data.empty());
  EXPECT_EQ(c->byte_length(), 4000u);
  auto s = Unpacked(Packed(std::string(2000, 'x'), {1, 2, 3, 2000}));
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(std::holds_alternative<std::string>(s->value()));
  auto b = Unpacked(Packed(Bytes{std::string(2000, 'x')}, {1, 2, 3, 2000}));
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(std::holds_alternative<Bytes>(b->value()));
}

TEST(UnitRefTest, EveryTruncationOrDamagedFieldIsADataErrorNeverACrash) {
  std::string good = Packed(Ids(4), {1, 2, 3, 32});
  // The ext body follows a 2- or 3-byte header here (ext 8: 0xc7 len type).
  ASSERT_EQ(static_cast<uint8_t>(good[0]), 0xc7);
  std::string body = good.substr(3);
  auto ext = [](const std::string& b) {
    msgpack::sbuffer buf;
    Packer pk(buf);
    pk.pack_ext(b.size(), kExtUnitRef);
    pk.pack_ext_body(b.data(), static_cast<uint32_t>(b.size()));
    return std::string(buf.data(), buf.size());
  };
  for (size_t n = 0; n < body.size(); ++n) {
    auto r = Unpacked(ext(body.substr(0, n)));
    EXPECT_EQ(r.status().code(), Code::kDataError) << n;
  }
  auto damaged = [&](size_t at, char to) {
    std::string b = body;
    b[at] = to;
    return Unpacked(ext(b)).status();
  };
  EXPECT_EQ(damaged(0, 9).code(), Code::kDataError);    // kind
  EXPECT_EQ(damaged(1, 99).code(), Code::kDataError);   // dtype
  EXPECT_EQ(damaged(2, 9).code(), Code::kDataError);    // ndim
  EXPECT_EQ(damaged(3, 5).code(), Code::kDataError);    // a dimension: the byte length no longer fits
  EXPECT_EQ(damaged(11, 1).code(), Code::kDataError);   // the byte length
  EXPECT_EQ(Unpacked(ext(body + "x")).status().code(), Code::kDataError);
  std::string far = Packed(Ids(4), {kMaxUnits, 2, 3, 32});
  EXPECT_EQ(Unpacked(far).status().code(), Code::kDataError);
}

TEST(UnitRefTest, DecodersOfValuesRefuseAReference) {
  std::string bytes = Packed(Ids(4), {1, 2, 3, 32});
  auto oh = ParseMsgpack(bytes.data(), bytes.size());
  ASSERT_TRUE(oh.ok());
  EXPECT_FALSE(UnpackValue(oh->get(), nullptr).ok());
}

TEST(UnitRefTest, ARecordKeepsItsReferencesThroughTheLog) {
  Record r;
  r.type = RecordType::kPut;
  PutRow row;
  row.index = 4;
  row.is_new = true;
  row.columns.emplace_back("ids", Cell::Ref(Tensor{DType::kI32, {600}, ""}, {1, 77, 123, 2400}));
  row.columns.emplace_back("reward", Value(1.5));
  r.rows.push_back(row);
  std::string bytes = EncodeRecord(r);
  auto back = DecodeRecord(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->rows.size(), 1u);
  EXPECT_EQ(back->rows[0].columns[0].second, row.columns[0].second);
  EXPECT_TRUE(back->rows[0].columns[0].second.is_ref());
  WalPayload p = EncodeRecordPayload(r);
  EXPECT_EQ(p.size, bytes.size());
}

PutRow NewRow(std::vector<std::pair<std::string, Cell>> cols) {
  PutRow r;
  r.is_new = true;
  r.columns = std::move(cols);
  return r;
}

Cell RefTo(uint32_t unit, uint64_t row) { return Cell::Ref(Bytes(), {unit, row, 1, 2000}); }

TEST(UnitRefTest, TheStoreReleasesAUnitRowWhenNoCellRefersToItAnyMore) {
  Store s;
  auto d = s.PlanDeclare("train", {"data"});
  ASSERT_TRUE(d.ok() && *d);
  s.Apply(**d);
  auto put = s.PlanPut({NewRow({{"data", RefTo(0, 10)}}), NewRow({{"data", RefTo(1, 10)}})}, "", 0);
  ASSERT_TRUE(put.ok());
  s.Apply(std::move(*put));
  EXPECT_TRUE(s.HoldsUnitRow(UnitKey(0, 10)));
  EXPECT_TRUE(s.HoldsUnitRow(UnitKey(1, 10)));
  EXPECT_EQ(s.unit_refs(), 2u);
  EXPECT_TRUE(s.TakeReleased().empty());
  GetRequest get;
  get.task = "train";
  get.count = 1;
  auto lease = s.PlanGet(get, 0);
  ASSERT_TRUE(lease.ok());
  s.Apply(*lease);
  auto ack = s.PlanAck("train", lease->lease, lease->indices);
  ASSERT_TRUE(ack.ok());
  s.Apply(*ack);
  EXPECT_EQ(s.TakeReleased(), std::vector<uint64_t>{UnitKey(0, 10)});
  EXPECT_FALSE(s.HoldsUnitRow(UnitKey(0, 10)));
  EXPECT_TRUE(s.HoldsUnitRow(UnitKey(1, 10)));
  Store copy;
  std::string snap = s.EncodeSnapshot();
  ASSERT_TRUE(copy.LoadSnapshot(snap.data(), snap.size()).ok());
  EXPECT_TRUE(copy.HoldsUnitRow(UnitKey(1, 10)));
  EXPECT_EQ(copy.unit_refs(), 1u);
}

TEST(UnitRefTest, AUnitStoreFreesOnlyTheRowsItHasAndListsThemByStagingTime) {
  Store s;
  auto put = s.PlanPut({NewRow({{"staged_ms", Value(int64_t{100})}}), NewRow({{"staged_ms", Value(int64_t{200})}})},
                       "", 0);
  ASSERT_TRUE(put.ok());
  s.Apply(std::move(*put));
  EXPECT_EQ(s.RowsBefore("staged_ms", 150, 0, 10), std::vector<uint64_t>{0});
  EXPECT_EQ(s.RowsBefore("staged_ms", 201, 0, 1), std::vector<uint64_t>{0});
  EXPECT_EQ(s.RowsBefore("staged_ms", 201, 1, 5), std::vector<uint64_t>{1});
  auto free = s.PlanFree({0, 0, 7});
  ASSERT_TRUE(free.ok());
  EXPECT_EQ(free->indices, std::vector<uint64_t>{0});
  EXPECT_EQ(free->rejected, (std::vector<uint64_t>{0, 7}));
  s.Apply(*free);
  EXPECT_EQ(s.live_rows(), 1u);
  std::string bytes = EncodeRecord(*free);
  auto back = DecodeRecord(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->type, RecordType::kFree);
}

TEST(UnitProtocolTest, BodiesRoundTripAndMalformedOnesAreClearErrors) {
  auto read = DecodeRead(EncodeRead({{3, 1}, {"a"}}));
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->indices, (std::vector<uint64_t>{3, 1}));
  auto held = DecodeHeld(EncodeHeld({2, {7}}));
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->unit, 2u);
  auto list = DecodeList(EncodeList({500, 10}));
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->age_ms, 500);
  EXPECT_EQ(DecodeRead(EncodeRead({{1}, {}})).status().code(), Code::kInvalidArgument);  // no columns
  EXPECT_EQ(DecodeFree(EncodeList({1, 1})).status().code(), Code::kInvalidArgument);      // no indices
  EXPECT_EQ(DecodeList(EncodeList({-1, 1})).status().code(), Code::kInvalidArgument);
  std::string bad = EncodeFree({1, 2});
  for (size_t n = 0; n < bad.size(); ++n) EXPECT_FALSE(DecodeFree(bad.substr(0, n)).ok()) << n;
  EXPECT_FALSE(DecodeHeld("\x91\x01").ok());  // an array, not a map
}

}  // namespace
}  // namespace rl::queue

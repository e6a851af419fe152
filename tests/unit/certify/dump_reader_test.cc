// The hardened reader: valid dumps load into the typed model; every hostile or broken file
// crafted here is refused with the right code, naming the offending object; raw reads are
// bit-exact (bf16 never converted) and streamable.
#include "certify/io/dump_reader.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "certify/io/dump_writer.h"
#include "tests/common/mini_dump.h"
#include "tests/common/test_paths.h"

namespace ncert::certify {
namespace {

using ncert::testing::open_mini_dump;
using ncert::testing::scratch_file;
using ncert::testing::write_mini_dump;

/// Opens the file and expects a refusal with `code` whose message names `object`.
void expect_refused(const std::string& path, ErrorCode code, const std::string& object,
                    const ReaderOptions& options = {}) {
  auto r = DumpReader::open(path, options);
  ASSERT_FALSE(r.ok()) << "accepted a file that must be refused";
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(object), std::string::npos)
      << "message does not name " << object << ": " << r.status().message();
}

TEST(DumpReader, ValidDumpLoadsIntoTheTypedModel) {
  const std::string path = scratch_file("valid.h5");
  write_mini_dump(path);
  auto r = DumpReader::open(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const DumpModel& m = r->model();
  EXPECT_EQ(m.engine, "test-engine");
  EXPECT_EQ(m.build, "abc123 -O2");
  EXPECT_EQ(m.model, "tiny");
  EXPECT_EQ(m.schema_version, 1);
  ASSERT_EQ(m.projections.size(), 1u);
  const ProjectionInfo& p = m.projections[0];
  EXPECT_EQ(p.name, "p");
  EXPECT_EQ(p.k, 8);
  EXPECT_EQ(p.n, 4);
  EXPECT_EQ(p.m, 4);
  EXPECT_EQ(p.p, 2);
  EXPECT_EQ(p.in_stride, 8);
  EXPECT_EQ(*p.requests, 2);
  EXPECT_TRUE(p.has_commit_counts);
  EXPECT_TRUE(p.has_y_unpacked);
  EXPECT_FALSE(p.has_y_packed);
  ASSERT_EQ(p.segments.size(), 2u);
  EXPECT_EQ(p.segments[0].format, reference::WeightFormat::kBf16);
  EXPECT_EQ(p.segments[1].row_begin, 2);
  ASSERT_EQ(m.logits.size(), 1u);
  EXPECT_EQ(m.logits[0].vocab, 5);
  EXPECT_EQ(m.logits[0].tokens, 3);
  ASSERT_EQ(m.tensors.size(), 1u);
  EXPECT_EQ(m.tensors[0].name, "kv");
  EXPECT_FALSE(m.refused());
  const DatasetInfo* w = m.dataset("/projections/p/weight/a/values");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kBf16);
  EXPECT_TRUE(w->tagged_raw);
}

TEST(DumpReader, AllBf16PatternsRoundTripBitForBitInBothStorageForms) {
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<std::uint16_t>(i);
  for (Bf16Form form : {Bf16Form::kU16Attr, Bf16Form::kFloat16}) {
    const std::string path = scratch_file(form == Bf16Form::kU16Attr ? "u16.h5" : "f16.h5");
    auto w = open_mini_dump(path);
    StorageOptions st;
    st.bf16_form = form;
    ASSERT_TRUE(w.write_dataset("/tensors/all", DType::kBf16, {256, 256}, all.data(), st).ok());
    ASSERT_TRUE(w.close().ok());
    auto r = DumpReader::open(path);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const DatasetInfo* d = r->model().dataset("/tensors/all");
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->dtype, DType::kBf16);
    EXPECT_EQ(d->tagged_raw, form == Bf16Form::kU16Attr);
    auto back = r->read_u16("/tensors/all");
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, all);  // NaN payloads included: no HDF5 conversion ran
  }
}

TEST(DumpReader, HashIsIndependentOfChunkingAndCompression) {
  std::vector<std::string> hashes;
  std::vector<StorageOptions> storages(5);
  storages[1].chunk_rows = 1;
  storages[2].chunk_rows = 2;
  storages[2].deflate = 6;
  storages[3].chunk_rows = 3;
  storages[3].deflate = 1;
  storages[3].shuffle = true;
  storages[3].fletcher32 = true;
  storages[4].compact = true;
  for (std::size_t i = 0; i < storages.size(); ++i) {
    std::string name = "h";
    name += std::to_string(i);
    name += ".h5";
    const std::string path = scratch_file(name);
    write_mini_dump(path, storages[i]);
    auto r = DumpReader::open(path);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    auto h = r->dataset_hash("/logits/run/logits");
    ASSERT_TRUE(h.ok());
    hashes.push_back(*h);
    auto hx = r->dataset_hash("/projections/p/weight/a/values");
    ASSERT_TRUE(hx.ok());
    hashes.push_back(*hx);
  }
  for (std::size_t i = 2; i < hashes.size(); ++i) EXPECT_EQ(hashes[i], hashes[i % 2]) << i;
}

TEST(DumpReader, RowReadsStreamAnyRange) {
  const std::string path = scratch_file("rows.h5");
  StorageOptions st;
  st.chunk_rows = 2;
  st.deflate = 3;
  write_mini_dump(path, st);
  auto r = DumpReader::open(path);
  ASSERT_TRUE(r.ok());
  std::vector<float> row(5);
  ASSERT_TRUE(r->read_rows("/logits/run/logits", 2, 1, row.data()).ok());
  EXPECT_EQ(row, (std::vector<float>{5, 4, 3, 2, 1}));
  std::vector<float> two(10);
  ASSERT_TRUE(r->read_rows("/logits/run/logits", 1, 2, two.data()).ok());
  EXPECT_EQ(two[4], 2.0f);
  EXPECT_EQ(two[5], 5.0f);
  EXPECT_EQ(r->read_rows("/logits/run/logits", 2, 2, two.data()).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(r->read_rows("/nope", 0, 1, two.data()).code(), ErrorCode::kMissingMember);
}

// ---- hostile and broken files: each refused with its code, naming the object ----------------

TEST(DumpReaderHostile, ExternalLinkIsRefusedWithoutOpeningTheTarget) {
  const std::string path = scratch_file("elink.h5");
  // The target is a FIFO: opening it for reading would block forever, so merely finishing
  // this test proves the reader never opened it.
  const std::string target = scratch_file("target-fifo.h5");
  ASSERT_EQ(::mkfifo(target.c_str(), 0600), 0);
  auto w = open_mini_dump(path);
  const hid_t f = static_cast<hid_t>(w.native_handle());
  ASSERT_GE(H5Lcreate_external(target.c_str(), "/data", f, "/tensors/stolen", H5P_DEFAULT, H5P_DEFAULT), 0);
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kExternalLink, "/tensors/stolen");
  auto s = DumpReader::survey(path);
  ASSERT_TRUE(s.ok());
  // A refusal is a Status: its message naming the file, the object and the value is the contract.
  EXPECT_NE(s->model().first_error().message().find("target-fifo.h5"), std::string::npos);
}

TEST(DumpReaderHostile, ExternalRawStorageIsRefused) {
  const std::string path = scratch_file("extstore.h5");
  auto w = open_mini_dump(path);
  const hid_t f = static_cast<hid_t>(w.native_handle());
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  ASSERT_GE(H5Pset_external(dcpl, "raw.bin", 0, 24), 0);
  hsize_t dims[1] = {6};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  hid_t d = H5Dcreate2(f, "/tensors/ext", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(d, 0);
  H5Dclose(d);
  H5Sclose(space);
  H5Pclose(dcpl);
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kExternalStorage, "/tensors/ext");
}

TEST(DumpReaderHostile, VirtualDatasetIsRefused) {
  const std::string path = scratch_file("vds.h5");
  auto w = open_mini_dump(path);
  const hid_t f = static_cast<hid_t>(w.native_handle());
  hsize_t dims[1] = {6};
  hid_t vspace = H5Screate_simple(1, dims, nullptr);
  hid_t sspace = H5Screate_simple(1, dims, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  ASSERT_GE(H5Pset_virtual(dcpl, vspace, "missing-source.h5", "/data", sspace), 0);
  hid_t d = H5Dcreate2(f, "/tensors/vds", H5T_IEEE_F32LE, vspace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(d, 0);
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(vspace);
  H5Sclose(sspace);
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kVirtualDataset, "/tensors/vds");
}

size_t identity_filter(unsigned, size_t, const unsigned[], size_t nbytes, size_t*, void**) { return nbytes; }

TEST(DumpReaderHostile, UnknownFilterIsRefusedEvenWhenRegisteredInProcess) {
  // Registered here so HDF5 can write (and could read) it: the reader must refuse it by its
  // allow-list, not by availability.
  const H5Z_class2_t cls = {H5Z_CLASS_T_VERS, static_cast<H5Z_filter_t>(32001), 1, 1, "test-identity", nullptr, nullptr,
                            identity_filter};
  ASSERT_GE(H5Zregister(&cls), 0);
  const std::string path = scratch_file("filter.h5");
  auto w = open_mini_dump(path);
  const hid_t f = static_cast<hid_t>(w.native_handle());
  hsize_t dims[1] = {6}, chunk[1] = {3};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, chunk);
  ASSERT_GE(H5Pset_filter(dcpl, 32001, H5Z_FLAG_MANDATORY, 0, nullptr), 0);
  hid_t d = H5Dcreate2(f, "/tensors/filtered", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(d, 0);
  const float data[6] = {1, 2, 3, 4, 5, 6};
  H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kFilterRefused, "/tensors/filtered");
  auto r = DumpReader::survey(path);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->model().first_error().message().find("32001"), std::string::npos);
}

TEST(DumpReaderHostile, WrongDatatypeIsRefused) {
  const std::string path = scratch_file("dtype.h5");
  auto w = open_mini_dump(path);
  const hid_t f = static_cast<hid_t>(w.native_handle());
  ASSERT_GE(H5Ldelete(f, "/projections/p/x", H5P_DEFAULT), 0);
  hsize_t dims[2] = {4, 8};
  hid_t space = H5Screate_simple(2, dims, nullptr);
  hid_t d = H5Dcreate2(f, "/projections/p/x", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(d, 0);
  H5Dclose(d);
  H5Sclose(space);
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kDatatypeRefused, "/projections/p/x");
}

TEST(DumpReaderHostile, Uint16WithoutBf16TagIsRefused) {
  const std::string path = scratch_file("u16.h5");
  auto w = open_mini_dump(path);
  const hid_t f = static_cast<hid_t>(w.native_handle());
  hsize_t dims[1] = {4};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  hid_t d = H5Dcreate2(f, "/tensors/raw16", H5T_STD_U16LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(d, 0);
  H5Dclose(d);
  H5Sclose(space);
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kDatatypeRefused, "/tensors/raw16");
}

TEST(DumpReaderHostile, SegmentsRefusedForTheirDatatypeAreNamedNotNoSegments) {
  // Every segment's values untagged uint16: each segment is left out with its datatype error,
  // and the refusal names that, not "no weight segments" (which came first and was false).
  const std::string path = scratch_file("u16-segments.h5");
  auto w = open_mini_dump(path);
  const hid_t f = static_cast<hid_t>(w.native_handle());
  for (const char* values : {"/projections/p/weight/a/values", "/projections/p/weight/b/values"}) {
    ASSERT_GE(H5Ldelete(f, values, H5P_DEFAULT), 0);
    hsize_t dims[2] = {2, 8};
    hid_t space = H5Screate_simple(2, dims, nullptr);
    hid_t d = H5Dcreate2(f, values, H5T_STD_U16LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    H5Dclose(d);
    H5Sclose(space);
  }
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kDatatypeRefused, "/projections/p/weight/a/values");
}

TEST(DumpReaderHostile, BigEndianFloatIsRefused) {
  const std::string path = scratch_file("be.h5");
  auto w = open_mini_dump(path);
  const hid_t f = static_cast<hid_t>(w.native_handle());
  hsize_t dims[1] = {4};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  hid_t d = H5Dcreate2(f, "/tensors/be", H5T_IEEE_F32BE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(d, 0);
  H5Dclose(d);
  H5Sclose(space);
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kDatatypeRefused, "/tensors/be");
}

TEST(DumpReaderHostile, MissingRequiredAttributeIsRefused) {
  const std::string path = scratch_file("noattr.h5");
  auto w = open_mini_dump(path);
  const hid_t f = static_cast<hid_t>(w.native_handle());
  ASSERT_GE(H5Adelete_by_name(f, "/projections/p", "accumulator", H5P_DEFAULT), 0);
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kMissingAttribute, "/projections/p");
  auto s = DumpReader::survey(path);
  ASSERT_TRUE(s.ok());
  EXPECT_NE(s->model().first_error().message().find("accumulator"), std::string::npos);
}

TEST(DumpReaderHostile, MissingRequiredDatasetIsRefused) {
  const std::string path = scratch_file("nosel.h5");
  auto w = open_mini_dump(path);
  ASSERT_GE(H5Ldelete(static_cast<hid_t>(w.native_handle()), "/projections/p/selector", H5P_DEFAULT), 0);
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kMissingMember, "/projections/p");
}

TEST(DumpReaderHostile, ShapeInconsistentWithAttributesIsRefused) {
  const std::string path = scratch_file("shape.h5");
  auto w = open_mini_dump(path);
  ASSERT_TRUE(w.write_attr("/projections/p", "in_stride", std::int64_t{16}).ok());
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kShapeMismatch, "/projections/p/x");
}

TEST(DumpReaderHostile, LogitsShapeDisagreeingWithVocabIsRefused) {
  const std::string path = scratch_file("vocab.h5");
  auto w = open_mini_dump(path);
  ASSERT_TRUE(w.write_attr("/logits/run", "vocab", std::int64_t{6}).ok());
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kShapeMismatch, "/logits/run/logits");
}

TEST(DumpReaderHostile, DimsWhoseByteCountOverflowsAreRefused) {
  const std::string path = scratch_file("overflow.h5");
  auto w = open_mini_dump(path);
  const hid_t f = static_cast<hid_t>(w.native_handle());
  // 2^40 x 2^40 elements: 2^80 does not fit 64 bits. Chunked and never written, so the file
  // stays tiny; a reader that multiplied naively would allocate a wrapped-around size.
  hsize_t dims[2] = {hsize_t{1} << 40, hsize_t{1} << 40}, chunk[2] = {1, 16};
  hid_t space = H5Screate_simple(2, dims, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 2, chunk);
  hid_t d = H5Dcreate2(f, "/tensors/huge", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(d, 0);
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kSizeOverflow, "/tensors/huge");
}

TEST(DumpReaderHostile, DatasetBeyondTheMemoryLimitIsRefused) {
  const std::string path = scratch_file("memlimit.h5");
  auto w = open_mini_dump(path);
  std::vector<float> big(1 << 19, 1.0f);  // 2 MiB
  ASSERT_TRUE(w.write_dataset("/projections/p/weight/b/values2", DType::kF32, {1 << 19}, big.data()).ok());
  std::vector<float> x2(4 * 300000, 0.0f);  // x of 4.8 MB with in_stride 300000
  ASSERT_GE(H5Ldelete(static_cast<hid_t>(w.native_handle()), "/projections/p/x", H5P_DEFAULT), 0);
  ASSERT_TRUE(w.write_dataset("/projections/p/x", DType::kF32, {4, 300000}, x2.data()).ok());
  ASSERT_TRUE(w.write_attr("/projections/p", "in_stride", std::int64_t{300000}).ok());
  ASSERT_TRUE(w.close().ok());
  ReaderOptions o;
  o.memory_limit = 1 << 20;
  expect_refused(path, ErrorCode::kMemoryLimit, "/projections/p/x", o);
  ReaderOptions roomy;
  EXPECT_TRUE(DumpReader::open(path, roomy).ok());
}

TEST(DumpReaderHostile, WrongSchemaVersionIsRefused) {
  const std::string path = scratch_file("v3.h5");
  auto w = open_mini_dump(path);
  ASSERT_TRUE(w.write_attr("/", "ncert_schema_version", std::int64_t{3}).ok());
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kSchemaVersion, "/");
}

TEST(DumpReaderHostile, ForeignSchemaIsRefused) {
  const std::string path = scratch_file("foreign.h5");
  auto w = open_mini_dump(path);
  ASSERT_TRUE(w.write_attr("/", "ncert_schema", std::string("other-format")).ok());
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kSchemaUnknown, "/");
}

TEST(DumpReaderHostile, SoftLinkInsideTheTreeIsRefused) {
  const std::string path = scratch_file("soft.h5");
  auto w = open_mini_dump(path);
  ASSERT_GE(
      H5Lcreate_soft("/tensors/kv", static_cast<hid_t>(w.native_handle()), "/tensors/alias", H5P_DEFAULT, H5P_DEFAULT),
      0);
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kLinkRefused, "/tensors/alias");
}

TEST(DumpReaderHostile, HardLinkAliasIsRefused) {
  const std::string path = scratch_file("hard.h5");
  auto w = open_mini_dump(path);
  const hid_t f = static_cast<hid_t>(w.native_handle());
  ASSERT_GE(H5Lcreate_hard(f, "/tensors/kv", f, "/tensors/kv_alias", H5P_DEFAULT, H5P_DEFAULT), 0);
  ASSERT_TRUE(w.close().ok());
  expect_refused(path, ErrorCode::kObjectAliased, "/tensors/kv_alias");
}

TEST(DumpReaderHostile, TruncatedFileIsRefused) {
  const std::string path = scratch_file("trunc.h5");
  write_mini_dump(path);
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size / 2);
  auto r = DumpReader::open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().code() == ErrorCode::kHdf5 || r.status().code() == ErrorCode::kNotHdf5)
      << r.status().to_string();
  EXPECT_NE(r.status().message().find("trunc.h5"), std::string::npos) << r.status().message();
}

TEST(DumpReaderHostile, TruncatedRawDataIsRefused) {
  // Keep the metadata (written first, at the front) but cut the tail holding raw data.
  const std::string path = scratch_file("trunc-raw.h5");
  auto w = open_mini_dump(path);
  std::vector<float> big(1 << 16, 2.0f);
  ASSERT_TRUE(w.write_dataset("/tensors/big", DType::kF32, {1 << 16}, big.data()).ok());
  ASSERT_TRUE(w.close().ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4096);
  auto r = DumpReader::open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kHdf5) << r.status().to_string();
}

TEST(DumpReaderHostile, NotAnHdf5FileIsRefused) {
  const std::string path = scratch_file("text.h5");
  std::ofstream(path) << "this is not an HDF5 file\n";
  expect_refused(path, ErrorCode::kNotHdf5, "text.h5");
  expect_refused(scratch_file("absent.h5"), ErrorCode::kFileNotFound, "absent.h5");
}

TEST(DumpReaderHostile, SurveyKeepsEveryFinding) {
  const std::string path = scratch_file("many.h5");
  auto w = open_mini_dump(path);
  const hid_t f = static_cast<hid_t>(w.native_handle());
  ASSERT_TRUE(w.write_attr("/", "ncert_schema_version", std::int64_t{3}).ok());
  ASSERT_GE(H5Lcreate_external("elsewhere.h5", "/x", f, "/logits/ext", H5P_DEFAULT, H5P_DEFAULT), 0);
  ASSERT_TRUE(w.create_group("/extras").ok());
  ASSERT_TRUE(w.close().ok());
  auto s = DumpReader::survey(path);
  ASSERT_TRUE(s.ok());
  int errors = 0, notes = 0;
  for (const Finding& fd : s->model().findings) {
    errors += fd.severity == Severity::kError;
    notes += fd.severity == Severity::kNote;
  }
  EXPECT_EQ(errors, 2);  // the external link and the schema version
  EXPECT_GE(notes, 1);   // /extras is an unknown root member
}

TEST(DumpReaderHostile, AnUnknownMemberIsIgnoredWhateverItsDatatype) {
  // ncert never reads a member the format does not define, so an int16 dataset there (refused
  // as a member ncert reads) is only noted as ignored, not also refused.
  const std::string path = scratch_file("extra-int16.h5");
  auto w = open_mini_dump(path);
  const hid_t f = static_cast<hid_t>(w.native_handle());
  const hsize_t dims[1] = {4};
  const hid_t space = H5Screate_simple(1, dims, nullptr);
  ASSERT_TRUE(w.create_group("/extras").ok());
  for (const char* name : {"/counts", "/extras/counts"}) {
    const hid_t d = H5Dcreate2(f, name, H5T_STD_I16LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(d, 0) << name;
    H5Dclose(d);
  }
  H5Sclose(space);
  ASSERT_TRUE(w.close().ok());
  auto s = DumpReader::survey(path);
  ASSERT_TRUE(s.ok());
  int ignored = 0;
  for (const Finding& fd : s->model().findings) {
    EXPECT_NE(fd.code, ErrorCode::kDatatypeRefused) << fd.path << ": " << fd.message;
    ignored += fd.severity == Severity::kNote && fd.message == "unknown root member, ignored";
  }
  EXPECT_EQ(ignored, 2);  // /counts and /extras
  EXPECT_TRUE(DumpReader::open(path).ok());
}

}  // namespace
}  // namespace ncert::certify

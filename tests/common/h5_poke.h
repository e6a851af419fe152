// Writes into an existing HDF5 dataset in place, to plant a modification after a file was
// written (a changed logit, a corrupted token list) without regenerating it.
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ncert::testing {

/// Reads (write = false) or sets element (row, col) of a 2-D f32 dataset.
inline void access_f32(const std::string& path, const std::string& dataset, std::int64_t row, std::int64_t col,
                       float& value, bool write) {
  const hid_t f = H5Fopen(path.c_str(), write ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  ASSERT_GE(d, 0) << dataset;
  const hid_t file_space = H5Dget_space(d);
  const hsize_t start[2] = {static_cast<hsize_t>(row), static_cast<hsize_t>(col)};
  const hsize_t count[2] = {1, 1};
  H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  const hid_t mem_space = H5Screate_simple(2, count, nullptr);
  if (write) {
    EXPECT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, mem_space, file_space, H5P_DEFAULT, &value), 0);
  } else {
    EXPECT_GE(H5Dread(d, H5T_NATIVE_FLOAT, mem_space, file_space, H5P_DEFAULT, &value), 0);
  }
  H5Sclose(mem_space);
  H5Sclose(file_space);
  H5Dclose(d);
  H5Fclose(f);
}

/// Sets element (row, col) of a 2-D f32 dataset.
inline void poke_f32(const std::string& path, const std::string& dataset, std::int64_t row, std::int64_t col,
                     float value) {
  access_f32(path, dataset, row, col, value, true);
}

/// Element (row, col) of a 2-D f32 dataset.
inline float read_f32(const std::string& path, const std::string& dataset, std::int64_t row, std::int64_t col) {
  float value = 0;
  access_f32(path, dataset, row, col, value, false);
  return value;
}

/// Element (row, col) of a 2-D dataset of 16-bit raw patterns (bf16 / f16, either form of
/// docs/dump-format.md §2), moved by `steps` patterns: for a finite value away from zero, that
/// many representable values farther from zero (negative: toward it). Returns the new pattern.
inline std::uint16_t step_bits16(const std::string& path, const std::string& dataset, std::int64_t row,
                                 std::int64_t col, int steps) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  EXPECT_GE(f, 0) << path;
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  EXPECT_GE(d, 0) << dataset;
  const hid_t type = H5Dget_type(d);
  EXPECT_EQ(H5Tget_size(type), 2U) << dataset;
  const hid_t file_space = H5Dget_space(d);
  const hsize_t start[2] = {static_cast<hsize_t>(row), static_cast<hsize_t>(col)};
  const hsize_t count[2] = {1, 1};
  H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  const hid_t mem_space = H5Screate_simple(2, count, nullptr);
  std::uint16_t bits = 0;
  EXPECT_GE(H5Dread(d, type, mem_space, file_space, H5P_DEFAULT, &bits), 0);
  // Sign-magnitude: adding to the magnitude bits moves away from zero in either sign.
  bits = static_cast<std::uint16_t>(bits + steps);
  EXPECT_GE(H5Dwrite(d, type, mem_space, file_space, H5P_DEFAULT, &bits), 0);
  H5Sclose(mem_space);
  H5Sclose(file_space);
  H5Tclose(type);
  H5Dclose(d);
  H5Fclose(f);
  return bits;
}

/// Reads (write = false: `bits` sized to the row) or sets row `row` of a 2-D dataset of 16-bit
/// raw patterns, as stored.
inline void access_row_bits16(const std::string& path, const std::string& dataset, std::int64_t row,
                              std::vector<std::uint16_t>& bits, bool write) {
  const hid_t f = H5Fopen(path.c_str(), write ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  ASSERT_GE(d, 0) << dataset;
  const hid_t type = H5Dget_type(d);
  const hid_t file_space = H5Dget_space(d);
  hsize_t dims[2] = {0, 0};
  EXPECT_EQ(H5Sget_simple_extent_dims(file_space, dims, nullptr), 2) << dataset;
  if (!write) bits.assign(dims[1], 0);
  const hsize_t start[2] = {static_cast<hsize_t>(row), 0};
  const hsize_t count[2] = {1, static_cast<hsize_t>(bits.size())};
  H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  const hid_t mem_space = H5Screate_simple(2, count, nullptr);
  if (write) {
    EXPECT_GE(H5Dwrite(d, type, mem_space, file_space, H5P_DEFAULT, bits.data()), 0);
  } else {
    EXPECT_GE(H5Dread(d, type, mem_space, file_space, H5P_DEFAULT, bits.data()), 0);
  }
  H5Sclose(mem_space);
  H5Sclose(file_space);
  H5Tclose(type);
  H5Dclose(d);
  H5Fclose(f);
}

/// Row `row` of a 2-D dataset of 16-bit raw patterns, as stored.
inline std::vector<std::uint16_t> read_row_bits16(const std::string& path, const std::string& dataset,
                                                  std::int64_t row) {
  std::vector<std::uint16_t> bits;
  access_row_bits16(path, dataset, row, bits, false);
  return bits;
}

/// Replaces row `row` of a 2-D dataset of 16-bit raw patterns (as stored; same length).
inline void write_row_bits16(const std::string& path, const std::string& dataset, std::int64_t row,
                             std::vector<std::uint16_t> bits) {
  access_row_bits16(path, dataset, row, bits, true);
}

/// Replaces the whole of a 1-D i32 dataset (same length).
inline void poke_i32(const std::string& path, const std::string& dataset, const std::vector<std::int32_t>& v) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  ASSERT_GE(d, 0) << dataset;
  EXPECT_GE(H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  H5Dclose(d);
  H5Fclose(f);
}

/// Overwrites row `to_row` of the 2-D dataset `to` with row `from_row` of `from` (same element
/// type and row length), bit for bit.
inline void copy_row(const std::string& path, const std::string& from, std::int64_t from_row, const std::string& to,
                     std::int64_t to_row) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  const hid_t src = H5Dopen2(f, from.c_str(), H5P_DEFAULT), dst = H5Dopen2(f, to.c_str(), H5P_DEFAULT);
  ASSERT_GE(src, 0) << from;
  ASSERT_GE(dst, 0) << to;
  const hid_t file_type = H5Dget_type(src), mem_type = H5Tget_native_type(file_type, H5T_DIR_DEFAULT);
  hsize_t dims[2] = {0, 0};
  const hid_t src_space = H5Dget_space(src), dst_space = H5Dget_space(dst);
  ASSERT_EQ(H5Sget_simple_extent_dims(src_space, dims, nullptr), 2) << from;
  std::vector<unsigned char> row(dims[1] * H5Tget_size(mem_type));
  const hsize_t count[2] = {1, dims[1]};
  const hid_t mem_space = H5Screate_simple(2, count, nullptr);
  const hsize_t from_start[2] = {static_cast<hsize_t>(from_row), 0}, to_start[2] = {static_cast<hsize_t>(to_row), 0};
  H5Sselect_hyperslab(src_space, H5S_SELECT_SET, from_start, nullptr, count, nullptr);
  H5Sselect_hyperslab(dst_space, H5S_SELECT_SET, to_start, nullptr, count, nullptr);
  EXPECT_GE(H5Dread(src, mem_type, mem_space, src_space, H5P_DEFAULT, row.data()), 0);
  EXPECT_GE(H5Dwrite(dst, mem_type, mem_space, dst_space, H5P_DEFAULT, row.data()), 0);
  H5Sclose(mem_space);
  H5Sclose(dst_space);
  H5Sclose(src_space);
  H5Tclose(mem_type);
  H5Tclose(file_type);
  H5Dclose(dst);
  H5Dclose(src);
  H5Fclose(f);
}

/// The whole of a 1-D i32 dataset.
inline std::vector<std::int32_t> read_i32(const std::string& path, const std::string& dataset) {
  std::vector<std::int32_t> v;
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return v;
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  const hid_t space = H5Dget_space(d);
  v.resize(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)));
  if (H5Dread(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0) v.clear();
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
  return v;
}

/// Sets the integer attribute `name` of the object at `object` (converted to its stored type).
inline void poke_attr_i64(const std::string& path, const std::string& object, const std::string& name,
                          std::int64_t value) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  // Opened through the object, which stays open: an attribute opened by path from the file
  // (H5Aopen_by_name) cannot be written in libhdf5 1.10 ("can't locate open attribute").
  const hid_t o = H5Oopen(f, object.c_str(), H5P_DEFAULT);
  ASSERT_GE(o, 0) << object;
  const hid_t a = H5Aopen(o, name.c_str(), H5P_DEFAULT);
  ASSERT_GE(a, 0) << object << " @" << name;
  EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &value), 0);
  H5Aclose(a);
  H5Oclose(o);
  H5Fclose(f);
}

/// Sets the string attribute `name` of the object at `object` to `value` (fixed-length ASCII,
/// scalar), replacing any attribute of that name.
inline void poke_attr_string(const std::string& path, const std::string& object, const std::string& name,
                             const std::string& value) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  const hid_t o = H5Oopen(f, object.c_str(), H5P_DEFAULT);
  ASSERT_GE(o, 0) << object;
  if (H5Aexists(o, name.c_str()) > 0) H5Adelete(o, name.c_str());
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, value.size());
  const hid_t s = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(o, name.c_str(), t, s, H5P_DEFAULT, H5P_DEFAULT);
  EXPECT_GE(H5Awrite(a, t, value.data()), 0) << object << " @" << name;
  H5Aclose(a);
  H5Sclose(s);
  H5Tclose(t);
  H5Oclose(o);
  H5Fclose(f);
}

/// Removes the link `object` (a member a dump may omit, dropped to test its absence).
inline void remove_link(const std::string& path, const std::string& object) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  EXPECT_GE(H5Ldelete(f, object.c_str(), H5P_DEFAULT), 0) << object;
  H5Fclose(f);
}

/// Replaces the link `alias` with a hard link to the object at `target`: after this the two
/// names are one object.
inline void relink_hard(const std::string& path, const std::string& target, const std::string& alias) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  EXPECT_GE(H5Ldelete(f, alias.c_str(), H5P_DEFAULT), 0) << alias;
  EXPECT_GE(H5Lcreate_hard(f, target.c_str(), f, alias.c_str(), H5P_DEFAULT, H5P_DEFAULT), 0) << target;
  H5Fclose(f);
}

}  // namespace ncert::testing

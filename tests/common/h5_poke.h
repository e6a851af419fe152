// Writes into an existing HDF5 dataset in place, to plant a modification after a file was
// written (a changed logit, a corrupted token list) without regenerating it.
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ncert::testing {

/// Sets element (row, col) of a 2-D f32 dataset.
inline void poke_f32(const std::string& path, const std::string& dataset, std::int64_t row, std::int64_t col,
                     float value) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  ASSERT_GE(d, 0) << dataset;
  const hid_t file_space = H5Dget_space(d);
  const hsize_t start[2] = {static_cast<hsize_t>(row), static_cast<hsize_t>(col)};
  const hsize_t count[2] = {1, 1};
  H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  const hid_t mem_space = H5Screate_simple(2, count, nullptr);
  EXPECT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, mem_space, file_space, H5P_DEFAULT, &value), 0);
  H5Sclose(mem_space);
  H5Sclose(file_space);
  H5Dclose(d);
  H5Fclose(f);
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

// Adds a random f32 state tensor to an open HDF5 file (a mini dump's native handle), contiguous
// or chunked with deflate, for the tests that read datasets back (mapped reads, row streams).
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace ncert::testing {

/// Adds /tensors/<name>, f32 [rows, cols] of normal random values from `seed`, contiguous
/// (chunk_rows 0) or in chunks of chunk_rows rows with deflate; returns its bytes.
inline std::vector<unsigned char> add_f32_tensor(hid_t file, const std::string& name, hsize_t rows, hsize_t cols,
                                                 hsize_t chunk_rows, unsigned seed) {
  std::vector<float> v(rows * cols);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  for (float& x : v) x = dist(rng);
  const hsize_t dims[2] = {rows, cols};
  const hid_t space = H5Screate_simple(2, dims, nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (chunk_rows > 0) {
    const hsize_t chunk[2] = {chunk_rows, cols};
    H5Pset_chunk(dcpl, 2, chunk);
    H5Pset_deflate(dcpl, 1);
  }
  const std::string path = "/tensors/" + name;
  const hid_t ds = H5Dcreate2(file, path.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  EXPECT_GE(ds, 0) << path;
  EXPECT_GE(H5Dwrite(ds, H5T_IEEE_F32LE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
  std::vector<unsigned char> bytes(v.size() * 4);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

}  // namespace ncert::testing

// A fresh directory per test (mkdtemp, so concurrent test runs never share files), removed after it.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint/remove_tree.h"

namespace atl::test {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "atoll-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  // Not std::filesystem::remove_all: see checkpoint/remove_tree.h (it crashed test binaries at exit
  // beside torch 2.11 on the GPU machine).
  void TearDown() override { checkpoint::remove_tree(dir_.string()); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // Writes `bytes` to the file `name` in the directory; returns its path.
  std::string write_file(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }

  std::filesystem::path dir_;
};

}  // namespace atl::test

// remove_tree: the POSIX directory-tree removal checkpoint pruning uses instead of
// std::filesystem::remove_all (see checkpoint/remove_tree.h for why).
#include "checkpoint/remove_tree.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint/checkpoint_store.h"
#include "tests/temp_dir_test.h"

namespace atl::checkpoint {
namespace {

namespace fs = std::filesystem;

class RemoveTree : public test::TempDirTest {};

TEST_F(RemoveTree, RemovesNestedDirectoriesAndFiles) {
  fs::create_directories(path("step-10/shards/deep"));
  write_file("step-10/manifest.pb", "m");
  write_file("step-10/shards/rank-0.safetensors", "s");
  write_file("step-10/shards/deep/x", "x");
  fs::create_directories(path("step-20"));
  remove_tree(path("step-10"));
  EXPECT_FALSE(fs::exists(path("step-10")));
  EXPECT_TRUE(fs::exists(path("step-20"))) << "a sibling was touched";
}

TEST_F(RemoveTree, RemovesLinksWithoutFollowingThem) {
  fs::create_directories(path("outside"));
  write_file("outside/keep", "k");
  fs::create_directories(path("tree"));
  fs::create_directory_symlink(path("outside"), path("tree/link"));
  remove_tree(path("tree"));
  EXPECT_FALSE(fs::exists(path("tree")));
  EXPECT_TRUE(fs::exists(path("outside/keep"))) << "the link's target was emptied";
}

TEST_F(RemoveTree, RemovesASingleFileAndIgnoresAMissingPath) {
  write_file("LATEST.tmp", "step-1\n");
  remove_tree(path("LATEST.tmp"));
  EXPECT_FALSE(fs::exists(path("LATEST.tmp")));
  EXPECT_NO_THROW(remove_tree(path("never-written")));
}

TEST_F(RemoveTree, NamesThePathItCannotRemove) {
  write_file("a-file", "f");
  const std::string below_a_file = path("a-file/step-1");  // ENOTDIR, not ENOENT
  try {
    remove_tree(below_a_file);
    FAIL() << "no error for " << below_a_file;
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot remove " + below_a_file), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Not a directory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace atl::checkpoint

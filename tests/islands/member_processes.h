// Islands tests start this test binary again as member processes (islands in separate jobs share
// no MPI world): each member reads its part from its environment and reports through its exit
// status and files the parent reads.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace atl::test {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// `argv[0]` started with `argv`, `settings` ("NAME=value") added to the environment, its output in
// `stdout_path` (when not empty) and its error output in `stderr_path`.
inline pid_t start_process(std::vector<std::string> argv, std::vector<std::string> settings,
                           const std::string& stdout_path, const std::string& stderr_path) {
  std::vector<char*> envp;
  for (std::string& s : settings) envp.push_back(s.data());
  for (char** e = environ; *e; ++e) envp.push_back(*e);
  envp.push_back(nullptr);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!stdout_path.empty())
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, stdout_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), envp.data()), 0) << argv[0];
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// This binary again, as a member: `settings` tell it its part.
inline pid_t start_member(std::vector<std::string> settings, const std::string& stderr_path) {
  return start_process({"/proc/self/exe"}, std::move(settings), "", stderr_path);
}

// Exit statuses of `pids` (-1: killed by a signal, or still running after `limit` and then killed).
inline std::vector<int> wait_all(const std::vector<pid_t>& pids, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<int> statuses(pids.size(), -2);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (statuses[i] != -2) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        statuses[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (statuses[i] == -2) {
          kill(pids[i], SIGKILL);
          waitpid(pids[i], nullptr, 0);
          statuses[i] = -1;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return statuses;
}

// The last line a member wrote to its error output (its own one-line reason; c10d's warnings may
// come before it).
inline std::string last_line(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text.substr(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
}

}  // namespace atl::test

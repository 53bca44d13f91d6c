#include "launcher/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace atl::launcher {
namespace {

// Our signals arrive on a file descriptor (signalfd) instead of a handler: no global state, and
// they wake the same poll() that reads the child's output.
class BlockedSignals {
 public:
  BlockedSignals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, &previous_);
    fd_ = signalfd(-1, &set, SFD_CLOEXEC);
    if (fd_ < 0) throw std::runtime_error(std::string("signalfd: ") + std::strerror(errno));
  }
  ~BlockedSignals() {
    close(fd_);
    sigprocmask(SIG_SETMASK, &previous_, nullptr);
  }
  int fd() const { return fd_; }
  const sigset_t& previous() const { return previous_; }

 private:
  sigset_t previous_;
  int fd_ = -1;
};

// Ends the child that ChildOptions::abandon gave up on: SIGTERM (mpirun passes it to its ranks, then
// kills them; srun ends its step), then SIGKILL once end_grace_s has passed; reaps it into `status`.
void end_child(pid_t child, const ChildOptions& options, int& status) {
  const pid_t target = options.own_process_group ? -child : child;
  kill(target, SIGTERM);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(0.0, options.end_grace_s));
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(child, &status, WNOHANG) == child) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(target, SIGKILL);
  waitpid(child, &status, 0);
}

// The fields of /proc/PID/stat after the command's closing parenthesis (a command may hold spaces
// and parentheses of its own): state first; empty when there is no such process.
std::vector<std::string> stat_fields(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  std::vector<std::string> fields;
  if (close == std::string::npos) return fields;
  std::istringstream rest(text.substr(close + 1));
  for (std::string field; rest >> field;) fields.push_back(field);
  return fields;
}

}  // namespace

unsigned long long process_start_time(long pid) {
  // starttime is field 22 of stat, the 20th after the command (field 2).
  const std::vector<std::string> fields = stat_fields(pid);
  return fields.size() > 19 ? std::stoull(fields[19]) : 0;
}

bool process_alive(long pid, unsigned long long start) {
  if (pid <= 0) return false;
  const std::vector<std::string> fields = stat_fields(pid);
  if (fields.size() <= 19 || fields[0] == "Z" || fields[0] == "X") return false;
  return start == 0 || std::stoull(fields[19]) == start;
}

ChildExit run_child(const std::vector<std::string>& command, const ChildOptions& options) {
  const BlockedSignals signals;
  int pipes[2][2] = {{-1, -1}, {-1, -1}};
  const bool capture = static_cast<bool>(options.output);
  if (capture)
    for (auto& p : pipes)
      if (pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &signals.previous(), nullptr);
    if (options.own_process_group) setpgid(0, 0);
    if (options.die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
    }
    if (capture) {
      dup2(pipes[0][1], STDOUT_FILENO);
      dup2(pipes[1][1], STDERR_FILENO);
    }
    std::vector<char*> argv;
    for (const std::string& c : command) argv.push_back(const_cast<char*>(c.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    const std::string message = "atoll: cannot run " + command[0] + ": " + std::strerror(errno) + "\n";
    (void)!write(STDERR_FILENO, message.data(), message.size());
    _exit(127);
  }
  ChildExit result;
  result.pid = child;
  if (options.started) options.started(child);
  std::vector<pollfd> fds = {{signals.fd(), POLLIN, 0}};
  if (capture) {
    close(pipes[0][1]);
    close(pipes[1][1]);
    fds.push_back({pipes[0][0], POLLIN, 0});
    fds.push_back({pipes[1][0], POLLIN, 0});
  }
  int status = 0;
  for (;;) {
    // With captured output, the child is done when both pipes are closed; else poll briefly and reap.
    const bool streams_open = capture && (fds[1].fd >= 0 || fds[2].fd >= 0);
    if (!streams_open && waitpid(child, &status, WNOHANG) == child) break;
    if (!streams_open && options.abandon && options.abandon()) {
      end_child(child, options, status);
      result.abandoned = true;
      break;
    }
    if (poll(fds.data(), fds.size(), streams_open ? -1 : 100) < 0 && errno != EINTR)
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info;
      if (read(signals.fd(), &info, sizeof info) == sizeof info) {
        result.received_signal = static_cast<int>(info.ssi_signo);
        kill(child, options.forward(result.received_signal));
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[65536];
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        options.output(static_cast<int>(i), buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;  // poll ignores negative descriptors
      }
    }
  }
  result.signaled = WIFSIGNALED(status);
  result.code = result.signaled ? WTERMSIG(status) : WEXITSTATUS(status);
  return result;
}

}  // namespace atl::launcher

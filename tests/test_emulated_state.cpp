// The emulated GPUs' state file against what any user may do to it (state.h; issue 33
// item 5; tests/security/test_emulated_gpu_state.py plays the same against a root aegisd):
// its lock held (the call fails after the bounded wait, naming the lock and its holder),
// the file truncated or overwritten (the call fails saying so, and the owner restores the
// machine), entries naming devices that do not exist (dropped, never indexed), a file made
// by another user, a link or a second name (refused at open, naming why).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <string>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/gpu/emulated/state.h"
#include "runtime/gpu/emulated/state_layout.h"
#include "tests/test_util.h"

namespace {

using namespace aegis;
using std::chrono::milliseconds;

std::uint32_t self() { return static_cast<std::uint32_t>(getpid()); }

class EmulatedState : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = test::temp_path("gpus.state");
    std::remove(path_.c_str());
  }
  void TearDown() override { std::remove(path_.c_str()); }

  std::unique_ptr<emu::State> open(milliseconds wait = milliseconds(50), int gpus = 2) {
    std::string error;
    auto s = emu::State::open(path_, std::vector<emu::GpuSpec>(static_cast<std::size_t>(gpus), {40960}), &error, wait);
    EXPECT_TRUE(s) << error;
    return s;
  }
  // What a call throws, or "" when it throws nothing.
  template <class F>
  static std::string error_of(F&& f) {
    try {
      f();
    } catch (const emu::StateError& e) {
      return e.what();
    }
    return "";
  }
  void write_at(std::size_t offset, const void* data, std::size_t n) {
    const int fd = ::open(path_.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, data, n, static_cast<off_t>(offset)), static_cast<ssize_t>(n));
    close(fd);
  }
  off_t size() const {
    struct stat st {};
    return stat(path_.c_str(), &st) == 0 ? st.st_size : -1;
  }

  std::string path_;
};

TEST_F(EmulatedState, MadeForEveryUserAndReadBack) {
  auto s = open();
  ASSERT_TRUE(s);
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  EXPECT_EQ(st.st_size, static_cast<off_t>(sizeof(emu::layout::File)));
  EXPECT_TRUE(s->allocate(1, self(), 700));
  auto other = open(milliseconds(50), 0);  // a second opener (a job) sees the same table
  ASSERT_TRUE(other);
  EXPECT_EQ(other->gpu_count(), 2);
  EXPECT_EQ(other->read(1).used_mib, 700);
}

TEST_F(EmulatedState, HeldLockFailsTheCallNamingItThenLetsGo) {
  auto s = open();
  ASSERT_TRUE(s);
  const int fd = ::open(path_.c_str(), O_RDWR);  // its own open file: a lock of its own
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string why = error_of([&] { s->read(0); });
  EXPECT_NE(why.find("its lock (flock) is held by pid " + std::to_string(getpid())), std::string::npos) << why;
  EXPECT_NE(why.find("for over 50 ms"), std::string::npos) << why;
  EXPECT_NE(error_of([&] { s->allocate(0, self(), 1); }), "");
  close(fd);  // let go
  EXPECT_TRUE(s->allocate(0, self(), 1));
  EXPECT_EQ(s->read(0).used_mib, 1);
}

TEST_F(EmulatedState, OpenWaitsBoundedForAHeldLock) {
  ASSERT_TRUE(open());
  const int fd = ::open(path_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  std::string error;
  EXPECT_FALSE(emu::State::open(path_, {}, &error, milliseconds(20)));
  EXPECT_NE(error.find("its lock (flock) is held"), std::string::npos) << error;
  close(fd);
}

TEST_F(EmulatedState, TruncatedFileFailsTheCallAndItsOwnerRestoresIt) {
  auto s = open();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->allocate(0, self(), 500));
  ASSERT_EQ(truncate(path_.c_str(), 0), 0);  // a mapped reader died of SIGBUS here
  const std::string why = error_of([&] { s->read(0); });
  EXPECT_NE(why.find("truncated to 0 bytes"), std::string::npos) << why;
  EXPECT_NE(why.find("restored by its owner"), std::string::npos) << why;  // this process made it
  EXPECT_EQ(size(), static_cast<off_t>(sizeof(emu::layout::File)));
  // The machine as configured, its processes forgotten.
  EXPECT_EQ(s->gpu_count(), 2);
  const auto r = s->read(0);
  EXPECT_EQ(r.total_mib, 40960);
  EXPECT_EQ(r.used_mib, 0);
  EXPECT_TRUE(s->allocate(0, self(), 10));

  ASSERT_EQ(truncate(path_.c_str(), 100), 0);  // within the header: also seen
  EXPECT_NE(error_of([&] { s->allocate(0, self(), 1); }).find("truncated to 100 bytes"), std::string::npos);
  EXPECT_EQ(s->read(1).total_mib, 40960);
}

TEST_F(EmulatedState, RestoredMachineKeepsItsMigLayout) {
  auto s = open();
  ASSERT_TRUE(s);
  std::string error;
  const auto layout = emu::parse_mig_layout("1:3g.20gb,2g.10gb", &error);
  ASSERT_TRUE(layout && s->set_mig(*layout, &error)) << error;
  ASSERT_EQ(s->instances(1).size(), 2u);
  ASSERT_EQ(truncate(path_.c_str(), 0), 0);
  EXPECT_NE(error_of([&] { s->gpu_count(); }), "");
  EXPECT_EQ(s->instances(1).size(), 2u);
  EXPECT_TRUE(s->device(1).mig_mode);
}

TEST_F(EmulatedState, OverwrittenHeaderIsReportedAndRestored) {
  auto s = open();
  ASSERT_TRUE(s);
  const std::int32_t garbage = 1 << 30;  // GPU count: far past any table
  write_at(offsetof(emu::layout::File, gpu_count), &garbage, sizeof garbage);
  const std::string why = error_of([&] { s->read(0); });
  EXPECT_NE(why.find("its header was overwritten"), std::string::npos) << why;
  EXPECT_EQ(s->gpu_count(), 2);
  const std::uint64_t magic = 0;
  write_at(0, &magic, sizeof magic);
  EXPECT_NE(error_of([&] { s->read(0); }).find("its header was overwritten"), std::string::npos);
  EXPECT_EQ(s->read(1).total_mib, 40960);
}

TEST_F(EmulatedState, EntryNamingNoDeviceIsDroppedNeverIndexed) {
  auto s = open();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->allocate(0, self(), 300));
  ASSERT_TRUE(s->allocate(1, self(), 200));
  const std::int32_t far = 1 << 30;  // an index far outside the device table
  write_at(offsetof(emu::layout::File, processes) + offsetof(emu::layout::Process, device), &far, sizeof far);
  EXPECT_EQ(s->read(0).used_mib, 0);  // dropped, the other kept
  EXPECT_EQ(s->read(1).used_mib, 200);
}

// A writer killed part-way leaves `writer` set: the next locker repairs (a duplicate entry
// counted once), as the robust mutex's EOWNERDEAD made it before.
TEST_F(EmulatedState, WriterKilledPartWayIsRepaired) {
  auto s = open();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->allocate(0, self(), 300));
  emu::layout::Process entry{};
  const int fd = ::open(path_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pread(fd, &entry, sizeof entry, offsetof(emu::layout::File, processes)), static_cast<ssize_t>(sizeof entry));
  ASSERT_EQ(pwrite(fd, &entry, sizeof entry, offsetof(emu::layout::File, processes) + sizeof entry),
            static_cast<ssize_t>(sizeof entry));
  const std::int32_t two = 2;
  const std::uint32_t dead = 0x7ffffff0;
  ASSERT_EQ(pwrite(fd, &two, sizeof two, offsetof(emu::layout::File, process_count)), 4);
  ASSERT_EQ(pwrite(fd, &dead, sizeof dead, offsetof(emu::layout::File, writer)), 4);
  close(fd);
  EXPECT_EQ(s->read(0).used_mib, 300);
}

TEST_F(EmulatedState, LinksAreRefused) {
  ASSERT_TRUE(open());
  const std::string link = path_ + ".link", second = path_ + ".second";
  ASSERT_EQ(symlink(path_.c_str(), link.c_str()), 0);
  ASSERT_EQ(::link(path_.c_str(), second.c_str()), 0);
  std::string error;
  EXPECT_FALSE(emu::State::open(link, {}, &error));
  EXPECT_NE(error.find("a symbolic link"), std::string::npos) << error;
  EXPECT_FALSE(emu::State::open(second, {}, &error));
  EXPECT_NE(error.find("has 2 links"), std::string::npos) << error;
  std::remove(link.c_str());
  std::remove(second.c_str());
}

TEST_F(EmulatedState, AnotherUsersFileIsRefusedNamingItsOwner) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to give the file to another uid";
  const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0666);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fchown(fd, 54321, 54321), 0);
  close(fd);
  std::string error;
  EXPECT_FALSE(emu::State::open(path_, {}, &error));
  EXPECT_NE(error.find("owned by uid 54321"), std::string::npos) << error;
  EXPECT_EQ(size(), 0);  // nothing written into it
}

TEST_F(EmulatedState, BadLockWaitIsOneLine) {
  setenv("AEGIS_EMULATED_LOCK_WAIT_MS", "soon", 1);
  std::string error;
  EXPECT_FALSE(emu::State::open(path_, {}, &error));
  unsetenv("AEGIS_EMULATED_LOCK_WAIT_MS");
  EXPECT_NE(error.find("AEGIS_EMULATED_LOCK_WAIT_MS='soon'"), std::string::npos) << error;
}

}  // namespace

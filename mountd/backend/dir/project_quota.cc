#include "backend/dir/project_quota.h"

#include <fcntl.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/quota.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "base/unique_fd.h"
#include <cstring>

#include "mount/mount_table.h"

#ifndef PRJQUOTA
#define PRJQUOTA 2
#endif
#ifndef SYS_quotactl_fd
#define SYS_quotactl_fd 443
#endif

namespace nodevol {
namespace {

// The block device of the filesystem holding dir, for kernels older than
// quotactl_fd (5.14): the source of the longest mount point prefixing dir.
Status DeviceOf(const std::string& dir, std::string* dev) {
  MountTable table;
  NODEVOL_RETURN_IF_ERROR(table.Load());
  size_t best = 0;
  for (const MountEntry& e : table.entries()) {
    bool prefix = e.target == "/" || dir == e.target || dir.compare(0, e.target.size() + 1, e.target + "/") == 0;
    if (prefix && e.target.size() >= best) {
      best = e.target.size();
      *dev = e.source;
    }
  }
  if (dev->empty()) return Status::Internal("no mount holds " + dir);
  return Status::Ok();
}

// quotactl on dir's filesystem: by descriptor where the kernel can.
int QuotaCtl(const std::string& dir, int cmd, uint32_t id, void* addr) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return -1;
  long rc = ::syscall(SYS_quotactl_fd, fd.get(), QCMD(cmd, PRJQUOTA), id, addr);
  if (rc == 0 || errno != ENOSYS) return static_cast<int>(rc);
  std::string dev;
  if (!DeviceOf(dir, &dev).ok()) {
    errno = ENODEV;
    return -1;
  }
  return ::quotactl(QCMD(cmd, PRJQUOTA), dev.c_str(), static_cast<int>(id), static_cast<caddr_t>(addr));
}

}  // namespace

Status ProbeProjectQuota(const std::string& dir) {
  // Accounting alone is not enough: ext4 made with -O quota,project accounts
  // project usage on every mount but enforces limits only when mounted
  // prjquota, and xfs mounted pqnoenforce accounts without enforcing.
  struct fs_quota_stat st = {};
  st.qs_version = FS_QSTAT_VERSION;
  if (QuotaCtl(dir, Q_XGETQSTAT, 0, &st) != 0)
    return Status::FailedPrecondition("project quotas are not enabled on the filesystem holding " + dir +
                                      " (" + std::strerror(errno) +
                                      "); mount it with prjquota (ext4 needs mkfs -O project,quota)");
  if (!(st.qs_flags & FS_QUOTA_PDQ_ACCT))
    return Status::FailedPrecondition("project quotas are not enabled on the filesystem holding " + dir +
                                      "; mount it with prjquota (ext4 needs mkfs -O project,quota)");
  if (!(st.qs_flags & FS_QUOTA_PDQ_ENFD))
    return Status::FailedPrecondition("project quotas are accounted but not enforced on the filesystem holding " +
                                      dir + "; mount it with prjquota (not pqnoenforce)");
  return Status::Ok();
}

Status GetProjectId(const std::string& dir, uint32_t* id) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) return Status::FromErrno("open " + dir, errno);
  struct fsxattr fa;
  if (::ioctl(fd.get(), FS_IOC_FSGETXATTR, &fa) != 0) return Status::FromErrno("FS_IOC_FSGETXATTR " + dir, errno);
  *id = fa.fsx_projid;
  return Status::Ok();
}

Status SetProjectId(const std::string& dir, uint32_t id) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) return Status::FromErrno("open " + dir, errno);
  struct fsxattr fa;
  if (::ioctl(fd.get(), FS_IOC_FSGETXATTR, &fa) != 0) return Status::FromErrno("FS_IOC_FSGETXATTR " + dir, errno);
  fa.fsx_projid = id;
  fa.fsx_xflags |= FS_XFLAG_PROJINHERIT;
  if (::ioctl(fd.get(), FS_IOC_FSSETXATTR, &fa) != 0) return Status::FromErrno("FS_IOC_FSSETXATTR " + dir, errno);
  return Status::Ok();
}

Status SetProjectLimit(const std::string& dir, uint32_t id, uint64_t bytes) {
  struct dqblk q = {};
  q.dqb_bhardlimit = (bytes + 1023) / 1024;  // in 1 KiB blocks
  q.dqb_bsoftlimit = q.dqb_bhardlimit;
  q.dqb_valid = QIF_BLIMITS;
  if (QuotaCtl(dir, Q_SETQUOTA, id, &q) != 0)
    return Status::FromErrno("set project quota " + std::to_string(id) + " on " + dir, errno);
  return Status::Ok();
}

Status ProjectIdInUse(const std::string& dir, uint32_t id, bool* in_use) {
  struct dqblk q = {};
  if (QuotaCtl(dir, Q_GETQUOTA, id, &q) != 0) {
    if (errno == ENOENT || errno == ESRCH) {  // xfs: no dquot for that id yet
      *in_use = false;
      return Status::Ok();
    }
    return Status::FromErrno("get project quota " + std::to_string(id) + " on " + dir, errno);
  }
  *in_use = q.dqb_curspace > 0 || q.dqb_curinodes > 0;
  return Status::Ok();
}

Status GetProjectUsage(const std::string& dir, uint32_t id, uint64_t* bytes) {
  struct dqblk q = {};
  *bytes = 0;
  if (QuotaCtl(dir, Q_GETQUOTA, id, &q) != 0) {
    if (errno == ENOENT || errno == ESRCH) return Status::Ok();
    return Status::FromErrno("get project quota " + std::to_string(id) + " on " + dir, errno);
  }
  *bytes = q.dqb_curspace;
  return Status::Ok();
}

}  // namespace nodevol

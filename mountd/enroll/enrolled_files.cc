#include "enroll/enrolled_files.h"

#include <errno.h>
#include <sys/stat.h>

#include <algorithm>

#include "base/atomic_file.h"

namespace nodevol::enroll {

Status EnrolledFiles::Load(const std::string& node, pki::CertFacts* facts,
                           std::chrono::system_clock::time_point* written) const {
  TlsFiles f = tls();
  std::string key, cert, ca;
  struct stat st;
  if (::lstat(f.cert.c_str(), &st) != 0 && errno == ENOENT) return Status::NotFound("nothing enrolled yet in " + dir);
  *written = std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
  NODEVOL_RETURN_IF_ERROR(ReadWholeFile(f.cert, &cert));
  NODEVOL_RETURN_IF_ERROR(ReadWholeFile(f.key, &key));
  NODEVOL_RETURN_IF_ERROR(ReadWholeFile(f.ca, &ca));
  if (Status st = pki::ReadCertificate(cert, key, facts); !st.ok())
    return Status::FailedPrecondition(f.cert + ": " + st.message());
  if (std::find(facts->dns_names.begin(), facts->dns_names.end(), node) == facts->dns_names.end())
    return Status::FailedPrecondition(f.cert + " does not name node " + node);
  if (facts->validity.not_after <= std::chrono::system_clock::now())
    return Status::FailedPrecondition(f.cert + " has expired");
  pki::CertFacts ca_facts;
  if (Status st = pki::ReadCertificate(ca, "", &ca_facts); !st.ok())
    return Status::FailedPrecondition(f.ca + ": " + st.message());
  return Status::Ok();
}

Status EnrolledFiles::WritePair(const std::string& key_pem, const std::string& cert_pem) const {
  NODEVOL_RETURN_IF_ERROR(EnsureDir(dir, 0700));
  NODEVOL_RETURN_IF_ERROR(WriteFileAtomic(dir, "tls.key", key_pem, /*durable=*/true, 0600));
  return WriteFileAtomic(dir, "tls.crt", cert_pem, /*durable=*/true, 0644);
}

Status EnrolledFiles::WriteCaBundle(const std::string& bundle_pem, bool* changed) const {
  *changed = false;
  std::string have;
  if (ReadWholeFile(tls().ca, &have).ok() && have == bundle_pem) return Status::Ok();
  NODEVOL_RETURN_IF_ERROR(EnsureDir(dir, 0700));
  NODEVOL_RETURN_IF_ERROR(WriteFileAtomic(dir, "ca.crt", bundle_pem, /*durable=*/true, 0644));
  *changed = true;
  return Status::Ok();
}

}  // namespace nodevol::enroll

#pragma once
// Certificates for TLS tests, made at run time with the OpenSSL API (nothing checked in that
// could expire): a CA, leaves signed by it, and PEM files for TlsOptions.
//
//   const auto& pki = ucp::test::TestPki::get();     // made once per test binary
//   options.certificates = {{pki.ecdsa.certificate, pki.ecdsa.private_key}};
//   client_options.ca_file = pki.ca_file;
//
//   ucp::test::TestCa ca(dir, "My CA");              // or a CA and leaves of your own
//   auto leaf = ca.issue(dir + "/leaf", ucp::test::certificate_request("x", {"x.test"}));
//
// The files live in a private temporary directory removed at exit. Any thread may read the
// TestPki; issuing is for one thread at a time.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

struct x509_st;
struct evp_pkey_st;

namespace ucp::test {

enum class KeyKind { kEcdsaP256, kRsa2048 };

/// PEM file paths of an issued certificate and its key.
struct IssuedCertificate {
  std::string certificate;
  std::string private_key;
};

struct CertificateRequest {
  std::string common_name;
  std::vector<std::string> dns_names;     // subjectAltName DNS entries ("*.x.test" allowed)
  std::vector<std::string> ip_addresses;  // subjectAltName IP entries
  KeyKind key = KeyKind::kEcdsaP256;
  int64_t not_before_s = -3600;      // relative to now
  int64_t not_after_s = 30 * 86400;  // relative to now (negative: already expired)
  bool client = false;               // extendedKeyUsage clientAuth instead of serverAuth
};

/// A request for `common_name` with those DNS names; set the other fields afterwards.
inline CertificateRequest certificate_request(std::string common_name,
                                              std::vector<std::string> dns_names) {
  CertificateRequest request;
  request.common_name = std::move(common_name);
  request.dns_names = std::move(dns_names);
  return request;
}

/// A self-signed ECDSA P-256 CA that issues certificates.
class TestCa {
 public:
  /// Writes the CA certificate to `directory`/`file_stem`.pem.
  TestCa(const std::string& directory, const std::string& file_stem, const std::string& name);
  TestCa(const TestCa&) = delete;
  TestCa& operator=(const TestCa&) = delete;
  ~TestCa();

  const std::string& certificate_file() const { return certificate_file_; }
  /// Issues a certificate into `path_stem`.crt.pem and `path_stem`.key.pem.
  IssuedCertificate issue(const std::string& path_stem, const CertificateRequest& request) const;

 private:
  x509_st* certificate_ = nullptr;
  evp_pkey_st* key_ = nullptr;
  std::string certificate_file_;
};

/// The certificates most tests use, made once.
struct TestPki {
  std::string directory;
  std::unique_ptr<TestCa> ca;        // "UCP Test CA"
  std::unique_ptr<TestCa> other_ca;  // an unrelated CA no client trusts
  std::string ca_file;
  IssuedCertificate ecdsa;             // localhost, example.test, *.wild.test, 127.0.0.1 (P-256)
  IssuedCertificate rsa;               // rsa.test, localhost (RSA 2048)
  IssuedCertificate expired;           // localhost, expired yesterday
  IssuedCertificate untrusted;         // localhost, signed by other_ca
  IssuedCertificate client;            // CN client.test, clientAuth
  IssuedCertificate untrusted_client;  // CN rogue.test, clientAuth, signed by other_ca

  static const TestPki& get();

 private:
  TestPki();
};

/// Bytes the heap holds right now (malloc'ed and not freed): mallinfo2, or the sanitizer's
/// allocator in sanitizer builds. For leak checks by difference, never by value.
size_t live_heap_bytes();

}  // namespace ucp::test

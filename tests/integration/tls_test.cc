// TLS and mutual TLS on the listener and on the link to the parent, with certificates
// made for the test by the openssl command-line tool.
#include <cstdlib>

#include "tests/integration/test_cluster.h"

namespace fedagg::testing {
namespace {

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir_template[] = "/tmp/fedagg-tls-XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
    // A CA, a server certificate for 127.0.0.1, and a client certificate, all from the CA.
    const std::string script = absl::StrCat(
        "set -e; cd ", dir_, "; exec >openssl.log 2>&1\n",
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=fedagg-test-ca\n",
        "for who in server client; do\n",
        "  openssl req -newkey rsa:2048 -nodes -keyout $who.key -out $who.csr -subj /CN=$who\n",
        "  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > $who.ext\n",
        "  openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $who.pem -days 1 -extfile $who.ext\n",
        "done\n");
    ASSERT_EQ(std::system(("bash -c '" + Escape(script) + "'").c_str()), 0)
        << "openssl failed; see " << dir_ << "/openssl.log";
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  static std::string Escape(const std::string& s) {
    std::string out;
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out;
  }
  std::string File(const std::string& name) const { return dir_ + "/" + name; }
  std::string Read(const std::string& name) const { return *ReadFile(File(name)); }

  std::shared_ptr<grpc::Channel> TlsChannel(int port, bool with_client_certificate) const {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = Read("ca.pem");
    if (with_client_certificate) {
      options.pem_cert_chain = Read("client.pem");
      options.pem_private_key = Read("client.key");
    }
    return grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::SslCredentials(options));
  }

  std::string dir_;
};

TEST_F(TlsTest, MutualTlsOnListenerAndParentLink) {
  ServerConfig config = LoopbackConfig();
  config.tls = {File("server.pem"), File("server.key"), File("ca.pem")};
  config.parent_tls = {File("client.pem"), File("client.key"), File("ca.pem")};
  auto cluster = Cluster::Start(1, config);  // the intermediate reaches the root over mTLS
  ASSERT_NE(cluster, nullptr);
  const v1::AggregationSpec spec = MakeSpec("tls", {{"w", "float32[2]", Intrinsic::kFederatedSum}});

  ControlClient trusted(TlsChannel(cluster->root->port(), /*with_client_certificate=*/true));
  ASSERT_TRUE(trusted.Create(spec).ok());
  // No client certificate, or no TLS at all: the handshake fails and nothing is reached.
  ControlClient no_certificate(TlsChannel(cluster->root->port(), false), CallOptions{"", absl::Seconds(2)});
  EXPECT_EQ(no_certificate.Get("tls").status().code(), absl::StatusCode::kUnavailable);
  ControlClient plaintext(Connect(cluster->root->port()), CallOptions{"", absl::Seconds(2)});
  EXPECT_EQ(plaintext.Get("tls").status().code(), absl::StatusCode::kUnavailable);

  // An update through the intermediate travels client -> intermediate -> root, all mTLS.
  auto stream = ContributeStream::Open(TlsChannel(cluster->intermediates[0]->port(), true), "c1");
  ASSERT_TRUE(stream.ok()) << stream.status();
  const std::vector<float> values = {1.5f, -2.0f};
  ASSERT_TRUE((*stream)->Contribute(spec, UpdateView{{FieldValue::Dense<float>(values)}, std::nullopt}).ok());
  ASSERT_TRUE(trusted.Seal("tls").ok());
  absl::StatusOr<v1::AggregationStatus> final = trusted.WatchUntilFinal("tls");
  ASSERT_TRUE(final.ok()) << final.status();
  ASSERT_EQ(final->state(), v1::FINALIZED) << final->detail();
  absl::StatusOr<AggregateResult> result = trusted.GetResult("tls");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->fields[0].value.values<float>()[0], 1.5f);
}

TEST_F(TlsTest, ClientCaWithoutServerCertificateIsRefused) {
  ServerConfig config = LoopbackConfig();
  config.tls.ca = File("ca.pem");
  absl::StatusOr<std::unique_ptr<FedaggServer>> server = FedaggServer::Start(config);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("--tls_client_ca needs --tls_cert"), std::string::npos);
}

}  // namespace
}  // namespace fedagg::testing

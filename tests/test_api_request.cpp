// The daemon's API: every op, every validation rule with its exact message, UTF-8 edge
// cases, the JSON round trip, memory sizes, YAML job specs and hostile inputs.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/api/container.h"
#include "runtime/api/request.h"

namespace aegis::api {
namespace {

// The error parse_request gives `line`, or "<accepted>".
std::string error_of(std::string_view line) {
  const auto r = parse_request(line);
  const auto* e = std::get_if<ParseError>(&r);
  return e ? e->message : "<accepted>";
}

// The request `line` parses to; a test failure (and a default T) if it is rejected or
// parses to another op.
template <class T>
T parsed(std::string_view line) {
  const auto r = parse_request(line);
  if (const auto* e = std::get_if<ParseError>(&r)) {
    ADD_FAILURE() << line << ": " << e->message;
    return T{};
  }
  const auto* t = std::get_if<T>(&std::get<Request>(r));
  if (!t) {
    ADD_FAILURE() << line << ": parsed to another op";
    return T{};
  }
  return *t;
}

std::string submit(std::string_view job) { return R"({"op":"submit","job":)" + std::string(job) + "}"; }
std::string job_error(std::string_view job) { return error_of(submit(job)); }
JobRequest submitted(std::string_view job) { return parsed<SubmitRequest>(submit(job)).job; }

std::string validate_error(const JobRequest& job) {
  const auto e = validate(job);
  return e ? e->message : "<valid>";
}

std::string yaml_error(std::string_view yaml) {
  const auto r = parse_job_spec_yaml(yaml);
  const auto* e = std::get_if<ParseError>(&r);
  return e ? e->message : "<accepted>";
}

JobRequest yaml_job(std::string_view yaml) {
  const auto r = parse_job_spec_yaml(yaml);
  if (const auto* e = std::get_if<ParseError>(&r)) {
    ADD_FAILURE() << yaml << ": " << e->message;
    return JobRequest{};
  }
  return std::get<JobRequest>(r);
}

JobRequest full_job() {
  JobRequest j;
  j.name = "resnet-50_v2.1";
  j.command = {"/usr/bin/python3", "train.py", "--lr=0.1", "quote \" backslash \\ tab \t é 中 😀"};
  j.workdir = "/home/ann/runs";
  j.env = {{"PYTHONUNBUFFERED", "1"}, {"_X9", "multi\nline"}, {"EMPTY", ""}};
  j.gpus = 4;
  j.mem_mib = 12288;
  j.exclusive = true;
  j.tags = {"team:vision", "model=resnet", "v1.2_a-b"};
  j.hint_gpu_util = 0.37;
  j.hint_sharing_score = 2;
  return j;
}

void expect_same(const JobRequest& a, const JobRequest& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.command, b.command);
  EXPECT_EQ(a.workdir, b.workdir);
  EXPECT_EQ(a.env, b.env);
  EXPECT_EQ(a.gpus, b.gpus);
  EXPECT_EQ(a.mem_mib, b.mem_mib);
  EXPECT_EQ(a.exclusive, b.exclusive);
  EXPECT_EQ(a.tags, b.tags);
  EXPECT_EQ(a.hint_gpu_util, b.hint_gpu_util);
  EXPECT_EQ(a.hint_sharing_score, b.hint_sharing_score);
  EXPECT_EQ(to_string(a.notify), to_string(b.notify));
}

struct Case {
  std::string input;
  std::string expected;
};

// --- every op ---

TEST(ApiRequest, SubmitReadsEveryField) {
  const JobRequest j = submitted(R"({"name":"bert","command":["python","-m","train"],"workdir":"/data/x",
      "env":{"A":"1","B_2":"two"},"gpus":2,"mem":"12G","exclusive":true,"tags":["t1","k=v"],
      "hints":{"gpu_util":0.5,"sharing_score":1}})");
  EXPECT_EQ(j.name, "bert");
  EXPECT_EQ(j.command, (std::vector<std::string>{"python", "-m", "train"}));
  EXPECT_EQ(j.workdir, "/data/x");
  EXPECT_EQ(j.env, (std::map<std::string, std::string>{{"A", "1"}, {"B_2", "two"}}));
  EXPECT_EQ(j.gpus, 2);
  EXPECT_EQ(j.mem_mib, 12288);
  EXPECT_TRUE(j.exclusive);
  EXPECT_EQ(j.tags, (std::vector<std::string>{"t1", "k=v"}));
  EXPECT_EQ(j.hint_gpu_util, 0.5);
  EXPECT_EQ(j.hint_sharing_score, 1);
}

TEST(ApiRequest, SubmitDefaults) {
  const JobRequest j = submitted(R"({"command":["/opt/bin/train.sh"]})");
  EXPECT_EQ(j.name, "train.sh");
  EXPECT_EQ(j.workdir, "");
  EXPECT_TRUE(j.env.empty());
  EXPECT_EQ(j.gpus, 1);
  EXPECT_FALSE(j.mem_mib);
  EXPECT_FALSE(j.exclusive);
  EXPECT_TRUE(j.tags.empty());
  EXPECT_FALSE(j.hint_gpu_util);
  EXPECT_FALSE(j.hint_sharing_score);
  EXPECT_EQ(submitted(R"({"command":["x"],"mem_mib":40960})").mem_mib, 40960);
}

TEST(ApiRequest, SubmitMayAttachTheJobToItsCaller) {
  EXPECT_FALSE(parsed<SubmitRequest>(submit(R"({"command":["x"]})")).attach);
  EXPECT_TRUE(parsed<SubmitRequest>(R"({"op":"submit","job":{"command":["x"]},"attach":true})").attach);
  EXPECT_EQ(error_of(R"({"op":"submit","job":{"command":["x"]},"attach":1})"), "attach: must be true or false");
  EXPECT_EQ(error_of(R"({"op":"submit","job":{"command":["x"]},"atach":true})"), "atach: unknown field");
}

TEST(ApiRequest, OtherOps) {
  EXPECT_FALSE(parsed<ListRequest>(R"({"op":"queue"})").all);
  EXPECT_TRUE(parsed<ListRequest>(R"({"op":"queue","all":true})").all);
  EXPECT_EQ(parsed<ShowRequest>(R"({"op":"show","id":42})").id, 42);
  EXPECT_EQ(parsed<ShowRequest>(R"({"op":"show","id":9223372036854775807})").id, INT64_MAX);
  EXPECT_EQ(parsed<CancelRequest>(R"({"op":"cancel","ids":[3,1,2]})").ids, (std::vector<std::int64_t>{3, 1, 2}));
  EXPECT_EQ(parsed<CancelRequest>(R"({"op":"cancel","id":7})").ids, (std::vector<std::int64_t>{7}));
  const auto logs = parsed<LogsRequest>(R"({"op":"logs","id":5,"stream":"stderr","offset":100,"max_bytes":4096})");
  EXPECT_EQ(logs.id, 5);
  EXPECT_TRUE(logs.stderr_stream);
  EXPECT_EQ(logs.offset, 100u);
  EXPECT_EQ(logs.max_bytes, 4096u);
  const auto logs_default = parsed<LogsRequest>(R"({"op":"logs","id":5})");
  EXPECT_FALSE(logs_default.stderr_stream);
  EXPECT_EQ(logs_default.offset, 0u);
  EXPECT_EQ(logs_default.max_bytes, 1u << 20);
  EXPECT_FALSE(parsed<LogsRequest>(R"({"op":"logs","id":5,"stream":"stdout","max_bytes":16777216})").stderr_stream);
  parsed<GpusRequest>(R"({"op":"gpus"})");
  EXPECT_EQ(parsed<HistoryRequest>(R"({"op":"history"})").limit, 100);
  EXPECT_EQ(parsed<HistoryRequest>(R"({"op":"history","limit":100000})").limit, 100000);
  parsed<PingRequest>(" {\"op\" : \"ping\"}\r\n");
}

// `queue` lists everyone's jobs (like squeue); `mine` narrows it to the caller's, whom the
// daemon knows from the socket, so the request carries a flag and never a user.
TEST(ApiRequest, QueueScope) {
  const auto plain = parsed<ListRequest>(R"({"op":"queue"})");
  EXPECT_FALSE(plain.all);
  EXPECT_FALSE(plain.mine);
  const auto mine = parsed<ListRequest>(R"({"op":"queue","mine":true})");
  EXPECT_TRUE(mine.mine);
  EXPECT_FALSE(mine.all);
  const auto both = parsed<ListRequest>(R"({"op":"queue","all":true,"mine":true})");
  EXPECT_TRUE(both.all);
  EXPECT_TRUE(both.mine);
  EXPECT_FALSE(parsed<ListRequest>(R"({"op":"queue","mine":false})").mine);
  EXPECT_EQ(error_of(R"({"op":"queue","mine":1})"), "mine: must be true or false");
  EXPECT_EQ(error_of(R"({"op":"queue","mine":"true"})"), "mine: must be true or false");
  EXPECT_EQ(error_of(R"({"op":"queue","mine":null})"), "mine: must be true or false");
  EXPECT_EQ(error_of(R"({"op":"queue","mine":true,"mine":false})"), "request: duplicate key 'mine'");
  EXPECT_EQ(error_of(R"({"op":"queue","user":"ann"})"), "user: unknown field");
  EXPECT_EQ(error_of(R"({"op":"history","mine":true})"), "mine: unknown field");
}

// --- request-level and op-level errors ---

TEST(ApiRequest, RequestErrors) {
  const std::vector<Case> cases = {
      {R"({"op":"rm"})", "op: unknown operation 'rm'"},
      {"{\"op\":\"r\\nm\"}", "op: unknown operation 'r\\x0am'"},
      {R"({"id":1})", "op: required"},
      {R"({"op":1})", "op: must be a string"},
      {R"(["op","ping"])", "request: must be a JSON object"},
      {R"("ping")", "request: must be a JSON object"},
      {R"({"op":"ping","verbose":true})", "verbose: unknown field"},
      {R"({"op":"gpus","all":true})", "all: unknown field"},
      {R"({"op":"ping","op":"ping"})", "request: duplicate key 'op'"},
      {R"({"op":"submit","job":{"command":["a"],"gpus":1,"gpus":2}})", "request: duplicate key 'gpus'"},
      {"", "request: not valid JSON: line 1, column 1: syntax error while parsing value - unexpected end of input; "
           "expected '[', '{', or a literal"},
      {R"({"op":"ping",})", "request: not valid JSON: line 1, column 14: syntax error while parsing object key - "
                            "unexpected '}'; expected string literal"},
      {R"({"op":"ping"} {})", "request: not valid JSON: line 1, column 15: syntax error while parsing value - "
                              "unexpected '{'; expected end of input"},
  };
  for (const auto& c : cases) EXPECT_EQ(error_of(c.input), c.expected) << c.input;
}

TEST(ApiRequest, OpFieldErrors) {
  const std::vector<Case> cases = {
      {R"({"op":"queue","all":1})", "all: must be true or false"},
      {R"({"op":"show"})", "id: required"},
      {R"({"op":"show","id":0})", "id: must be a positive 64-bit integer"},
      {R"({"op":"show","id":-3})", "id: must be a positive 64-bit integer"},
      {R"({"op":"show","id":2.0})", "id: must be a positive 64-bit integer"},
      {R"({"op":"show","id":"4"})", "id: must be a positive 64-bit integer"},
      {R"({"op":"show","id":9223372036854775808})", "id: must be a positive 64-bit integer"},
      {R"({"op":"show","id":18446744073709551616})", "id: must be a positive 64-bit integer"},
      {R"({"op":"cancel"})", "ids: required"},
      {R"({"op":"cancel","id":1,"ids":[2]})", "ids: give either id or ids, not both"},
      {R"({"op":"cancel","ids":[]})", "ids: must be an array of 1 to 1000 ids"},
      {R"({"op":"cancel","ids":5})", "ids: must be an array of 1 to 1000 ids"},
      {R"({"op":"cancel","ids":[1,2,null]})", "ids[2]: must be a positive 64-bit integer"},
      {R"({"op":"cancel","id":0})", "id: must be a positive 64-bit integer"},
      {R"({"op":"logs","id":1,"stream":"both"})", "stream: must be 'stdout' or 'stderr'"},
      {R"({"op":"logs","id":1,"stream":1})", "stream: must be 'stdout' or 'stderr'"},
      {R"({"op":"logs","id":1,"offset":-1})", "offset: must be a non-negative 64-bit integer"},
      {R"({"op":"logs","id":1,"max_bytes":0})", "max_bytes: must be an integer between 1 and 16777216"},
      {R"({"op":"logs","id":1,"max_bytes":16777217})", "max_bytes: must be an integer between 1 and 16777216"},
      {R"({"op":"history","limit":0})", "limit: must be an integer between 1 and 100000"},
      {R"({"op":"history","limit":100001})", "limit: must be an integer between 1 and 100000"},
      {R"({"op":"submit"})", "job: required"},
      {R"({"op":"submit","job":["a"]})", "job: must be an object"},
  };
  for (const auto& c : cases) EXPECT_EQ(error_of(c.input), c.expected) << c.input;
  std::string ids;
  for (int i = 1; i <= 1001; ++i) ids += (i > 1 ? "," : "") + std::to_string(i);
  EXPECT_EQ(error_of(R"({"op":"cancel","ids":[)" + ids + "]}"), "ids: must be an array of 1 to 1000 ids");
}

// --- job validation, one rule at a time ---

TEST(ApiJob, TypeErrors) {
  const std::vector<Case> cases = {
      {R"({"command":"ls -l"})", "job.command: must be an array of strings"},
      {R"({"command":["ls",1]})", "job.command[1]: must be a string"},
      {R"({"command":["ls"],"name":7})", "job.name: must be a string"},
      {R"({"command":["ls"],"workdir":null})", "job.workdir: must be a string"},
      {R"({"command":["ls"],"env":["A=1"]})", "job.env: must be an object of strings"},
      {R"({"command":["ls"],"env":{"A":1}})", "job.env.A: must be a string"},
      {R"({"command":["ls"],"gpus":"2"})", "job.gpus: must be an integer between 1 and 64"},
      {R"({"command":["ls"],"gpus":2.0})", "job.gpus: must be an integer between 1 and 64"},
      {R"({"command":["ls"],"gpus":1e1})", "job.gpus: must be an integer between 1 and 64"},
      {R"({"command":["ls"],"gpus":true})", "job.gpus: must be an integer between 1 and 64"},
      {R"({"command":["ls"],"mem":12})", "job.mem: must be a string"},
      {R"({"command":["ls"],"exclusive":"yes"})", "job.exclusive: must be true or false"},
      {R"({"command":["ls"],"tags":"a"})", "job.tags: must be an array of strings"},
      {R"({"command":["ls"],"hints":[]})", "job.hints: must be an object"},
      {R"({"command":["ls"],"hints":{"gpu_util":"0.5"}})", "job.hints.gpu_util: must be a number between 0 and 1"},
      {R"({"command":["ls"],"hints":{"sharing_score":1.0}})",
       "job.hints.sharing_score: must be an integer between 0 and 2"},
      {R"({"command":["ls"],"hints":{"util":1}})", "job.hints.util: unknown field"},
      {R"({"command":["ls"],"user":"root"})", "job.user: unknown field"},
  };
  for (const auto& c : cases) EXPECT_EQ(job_error(c.input), c.expected) << c.input;
}

TEST(ApiJob, NameRule) {
  const std::vector<Case> cases = {
      {R"({"command":["ls"],"name":"a b"})", "job.name: must match [A-Za-z0-9._-]{1,128}"},
      {R"({"command":["ls"],"name":"../etc/passwd"})", "job.name: must match [A-Za-z0-9._-]{1,128}"},
      {R"({"command":["ls"],"name":"."})", "job.name: must not be '.' or '..'"},
      {R"({"command":["ls"],"name":".."})", "job.name: must not be '.' or '..'"},
      {R"({"command":["ls"],"name":")" + std::string(129, 'n') + "\"}", "job.name: must match [A-Za-z0-9._-]{1,128}"},
  };
  for (const auto& c : cases) EXPECT_EQ(job_error(c.input), c.expected) << c.input;
  EXPECT_EQ(submitted(R"({"command":["ls"],"name":")" + std::string(128, 'n') + "\"}").name, std::string(128, 'n'));
  EXPECT_EQ(submitted(R"({"command":["ls"],"name":"..."})").name, "...");
}

TEST(ApiJob, DefaultNameIsTheSanitisedBasenameOfArgv0) {
  const std::vector<Case> cases = {
      {R"(["python3","x.py"])", "python3"},
      {R"(["./bin/train.py"])", "train.py"},
      {R"(["/opt/my tools/run ü+x.sh"])", "run___x.sh"},
      {R"(["/usr/bin/"])", "job"},
      {R"(["/a/.."])", "job"},
      {R"(["."])", "job"},
      {R"(["😀"])", "_"},
      {"[\"" + std::string(200, 'x') + "\"]", std::string(128, 'x')},
  };
  for (const auto& c : cases) EXPECT_EQ(submitted(R"({"command":)" + c.input + "}").name, c.expected) << c.input;
}

TEST(ApiJob, CommandRule) {
  EXPECT_EQ(job_error("{}"), "job.command: must have 1 to 4096 entries");
  EXPECT_EQ(job_error(R"({"command":[]})"), "job.command: must have 1 to 4096 entries");
  EXPECT_EQ(job_error(R"({"command":[""]})"), "job.command[0]: must not be empty");
  EXPECT_EQ(job_error(R"({"command":["ls","a\u0000b"]})"), "job.command[1]: contains a NUL byte");
  std::string many = R"({"command":["x")";
  for (int i = 0; i < 4096; ++i) many += R"(,"y")";
  EXPECT_EQ(job_error(many + "]}"), "job.command: must have 1 to 4096 entries");
  JobRequest j;
  j.command = {"x", std::string(kMaxCommandBytes, 'a')};
  EXPECT_EQ(validate_error(j), "command: longer than 1048576 bytes in total");
  j.command = {"x", std::string(kMaxCommandBytes - 1, 'a')};
  EXPECT_EQ(validate_error(j), "<valid>");
  j.command.resize(kMaxArgs, "z");
  j.command[1].resize(kMaxCommandBytes - kMaxArgs);
  EXPECT_EQ(validate_error(j), "<valid>");
}

TEST(ApiJob, WorkdirRule) {
  const std::vector<Case> normalised = {
      {"/a//b/./c/../d/", "/a/b/d"}, {"/", "/"}, {"//", "/"}, {"/a/..", "/"}, {"/.x/..y/", "/.x/..y"},
  };
  for (const auto& c : normalised)
    EXPECT_EQ(submitted(R"({"command":["ls"],"workdir":")" + c.input + "\"}").workdir, c.expected) << c.input;
  const std::vector<Case> cases = {
      {"relative/dir", "job.workdir: must be an absolute path"},
      {"./x", "job.workdir: must be an absolute path"},
      {"/..", "job.workdir: '..' goes above /"},
      {"/a/../../etc", "job.workdir: '..' goes above /"},
      {"/a\\u0000b", "job.workdir: contains a NUL byte"},
      {"/" + std::string(4096, 'd'), "job.workdir: longer than 4096 bytes"},
  };
  for (const auto& c : cases)
    EXPECT_EQ(job_error(R"({"command":["ls"],"workdir":")" + c.input + "\"}"), c.expected) << c.input;
  EXPECT_EQ(submitted(R"({"command":["ls"],"workdir":"/)" + std::string(4095, 'd') + "\"}").workdir.size(), 4096u);
}

TEST(ApiJob, EnvRule) {
  const std::vector<Case> cases = {
      {R"({"1X":"v"})", "job.env: '1X' is not a variable name ([A-Za-z_][A-Za-z0-9_]*, at most 256 bytes)"},
      {R"({"A-B":"v"})", "job.env: 'A-B' is not a variable name ([A-Za-z_][A-Za-z0-9_]*, at most 256 bytes)"},
      {R"({"":"v"})", "job.env: '' is not a variable name ([A-Za-z_][A-Za-z0-9_]*, at most 256 bytes)"},
      {R"({"A=B":"v"})", "job.env: 'A=B' is not a variable name ([A-Za-z_][A-Za-z0-9_]*, at most 256 bytes)"},
      {R"({"CUDA_VISIBLE_DEVICES":"0"})", "job.env.CUDA_VISIBLE_DEVICES: reserved: the daemon sets it"},
      {R"({"CUDA_DEVICE_ORDER":"PCI_BUS_ID"})", "job.env.CUDA_DEVICE_ORDER: reserved: the daemon sets it"},
      {R"({"AEGIS_JOB_ID":"1"})", "job.env.AEGIS_JOB_ID: reserved: the daemon sets it"},
      {R"({"A":"x\u0000y"})", "job.env.A: contains a NUL byte"},
  };
  for (const auto& c : cases)
    EXPECT_EQ(job_error(R"({"command":["ls"],"env":)" + c.input + "}"), c.expected) << c.input;
  JobRequest j;
  j.command = {"ls"};
  j.env = {{std::string(256, 'N'), std::string(128 << 10, 'v')}};
  EXPECT_EQ(validate_error(j), "<valid>");
  j.env = {{std::string(257, 'N'), "v"}};
  EXPECT_EQ(validate_error(j), "env: '" + std::string(64, 'N') +
                                   "...' is not a variable name ([A-Za-z_][A-Za-z0-9_]*, at most 256 bytes)");
  j.env = {{"BIG", std::string((128 << 10) + 1, 'v')}};
  EXPECT_EQ(validate_error(j), "env.BIG: longer than 131072 bytes");
  j.env.clear();
  for (std::size_t i = 0; i < kMaxEnvEntries; ++i) j.env["V" + std::to_string(i)] = "x";
  EXPECT_EQ(validate_error(j), "<valid>");
  j.env["ONE_MORE"] = "x";
  EXPECT_EQ(validate_error(j), "env: more than 1024 entries");
}

TEST(ApiJob, NumberRules) {
  const std::vector<Case> cases = {
      {R"("gpus":0)", "job.gpus: must be an integer between 1 and 64"},
      {R"("gpus":65)", "job.gpus: must be an integer between 1 and 64"},
      {R"("gpus":4294967297)", "job.gpus: must be an integer between 1 and 64"},
      {R"("mem_mib":0)", "job.mem_mib: must be an integer between 1 and 1073741824"},
      {R"("mem_mib":1073741825)", "job.mem_mib: must be an integer between 1 and 1073741824"},
      {R"("mem":"0G")", "job.mem: not a memory size from 1M to 1P (such as 12000, 512M, 12G, 1.5GiB)"},
      {R"("mem":"2P")", "job.mem: not a memory size from 1M to 1P (such as 12000, 512M, 12G, 1.5GiB)"},
      {R"("mem":"1G","mem_mib":1024)", "job.mem_mib: give either mem or mem_mib, not both"},
      {R"("mem_mib":1024,"mem":"1G")", "job.mem_mib: give either mem or mem_mib, not both"},
      {R"("hints":{"gpu_util":1.0001})", "job.hints.gpu_util: must be a number between 0 and 1"},
      {R"("hints":{"gpu_util":-0.1})", "job.hints.gpu_util: must be a number between 0 and 1"},
      {R"("hints":{"sharing_score":3})", "job.hints.sharing_score: must be an integer between 0 and 2"},
      {R"("hints":{"sharing_score":-1})", "job.hints.sharing_score: must be an integer between 0 and 2"},
  };
  for (const auto& c : cases) EXPECT_EQ(job_error(R"({"command":["ls"],)" + c.input + "}"), c.expected) << c.input;
  const JobRequest edge = submitted(R"({"command":["ls"],"gpus":64,"mem_mib":1073741824,
      "hints":{"gpu_util":0,"sharing_score":0}})");
  EXPECT_EQ(edge.gpus, 64);
  EXPECT_EQ(edge.mem_mib, 1073741824);
  EXPECT_EQ(edge.hint_gpu_util, 0.0);
  EXPECT_EQ(submitted(R"({"command":["ls"],"hints":{"gpu_util":1}})").hint_gpu_util, 1.0);
}

TEST(ApiJob, TagRules) {
  const std::vector<Case> cases = {
      {R"(["ok",""])", "job.tags[1]: must match [A-Za-z0-9._:=-]{1,64}"},
      {R"(["a b"])", "job.tags[0]: must match [A-Za-z0-9._:=-]{1,64}"},
      {R"(["a/b"])", "job.tags[0]: must match [A-Za-z0-9._:=-]{1,64}"},
      {"[\"" + std::string(65, 't') + "\"]", "job.tags[0]: must match [A-Za-z0-9._:=-]{1,64}"},
  };
  for (const auto& c : cases) EXPECT_EQ(job_error(R"({"command":["ls"],"tags":)" + c.input + "}"), c.expected);
  std::string tags = "[\"" + std::string(64, 't') + "\"";
  for (int i = 1; i < 64; ++i) tags += R"(,"a:b=c.d_e-f")";
  EXPECT_EQ(submitted(R"({"command":["ls"],"tags":)" + tags + "]}").tags.size(), 64u);
  EXPECT_EQ(job_error(R"({"command":["ls"],"tags":)" + tags + R"(,"x"]})"), "job.tags: more than 64 entries");
}

TEST(ApiJob, ValidateAppliesTheRulesToJobsBuiltElsewhere) {
  JobRequest j = full_job();
  EXPECT_EQ(validate_error(j), "<valid>");
  j.gpus = 0;
  EXPECT_EQ(validate_error(j), "gpus: must be an integer between 1 and 64");
  j = full_job();
  j.mem_mib = 0;
  EXPECT_EQ(validate_error(j), "mem_mib: must be an integer between 1 and 1073741824");
  j = full_job();
  j.hint_gpu_util = std::nan("");
  EXPECT_EQ(validate_error(j), "hints.gpu_util: must be a number between 0 and 1");
  j = full_job();
  j.hint_sharing_score = 5;
  EXPECT_EQ(validate_error(j), "hints.sharing_score: must be an integer between 0 and 2");
  j = full_job();
  j.name.clear();  // the parsers default it from the command
  EXPECT_EQ(validate_error(j), "<valid>");
  j.workdir.clear();  // the daemon's choice
  EXPECT_EQ(validate_error(j), "<valid>");
  j.command.clear();
  EXPECT_EQ(validate_error(j), "command: must have 1 to 4096 entries");
}

// --- UTF-8: validate() sees raw bytes (CLI arguments); the wire is JSON, already UTF-8 ---

TEST(ApiUtf8, StrictValidator) {
  const std::vector<std::pair<std::string, bool>> cases = {
      {"plain ascii", true},
      {"\xc2\x80", true},                   // U+0080, smallest 2-byte
      {"\xdf\xbf", true},                   // U+07FF
      {"\xe0\xa0\x80", true},               // U+0800, smallest 3-byte
      {"\xed\x9f\xbf", true},               // U+D7FF, just below the surrogates
      {"\xee\x80\x80", true},               // U+E000, just above them
      {"\xef\xbf\xbf", true},               // U+FFFF
      {"\xf0\x90\x80\x80", true},           // U+10000, smallest 4-byte
      {"\xf4\x8f\xbf\xbf", true},           // U+10FFFF, the largest code point
      {"\xc0\x80", false},                  // overlong NUL
      {"\xc1\xbf", false},                  // overlong U+007F
      {"\xe0\x9f\xbf", false},              // overlong U+07FF
      {"\xf0\x8f\xbf\xbf", false},          // overlong U+FFFF
      {"\xed\xa0\x80", false},              // U+D800, high surrogate
      {"\xed\xbf\xbf", false},              // U+DFFF, low surrogate
      {"\xed\xa0\xbd\xed\xb8\x80", false},  // CESU-8 surrogate pair
      {"\xf4\x90\x80\x80", false},          // U+110000
      {"\xf5\x80\x80\x80", false},          // no code point starts F5
      {"\xff", false},
      {"\x80", false},                      // lone continuation
      {"a\xe2\x82", false},                 // truncated 3-byte at the end
      {"\xe2\x82z", false},                 // truncated 3-byte in the middle
      {"\xf0\x9f\x98", false},              // truncated 4-byte
      {"\xc3", false},                      // truncated 2-byte
  };
  for (const auto& [text, valid] : cases) {
    JobRequest j;
    j.command = {"echo", "1", "2", text};
    EXPECT_EQ(validate_error(j), valid ? "<valid>" : "command[3]: not valid UTF-8") << testing::PrintToString(text);
  }
}

TEST(ApiUtf8, EveryStringIsChecked) {
  const std::string bad = "x\xed\xa0\x80";
  JobRequest j = full_job();
  j.workdir = "/" + bad;
  EXPECT_EQ(validate_error(j), "workdir: not valid UTF-8");
  j = full_job();
  j.env["V"] = bad;
  EXPECT_EQ(validate_error(j), "env.V: not valid UTF-8");
  j = full_job();
  j.name = bad;
  EXPECT_EQ(validate_error(j), "name: must match [A-Za-z0-9._-]{1,128}");
  j = full_job();
  j.tags = {bad};
  EXPECT_EQ(validate_error(j), "tags[0]: must match [A-Za-z0-9._:=-]{1,64}");
  j = full_job();
  j.env[bad] = "v";
  EXPECT_EQ(validate_error(j),
            "env: 'x\\xed\\xa0\\x80' is not a variable name ([A-Za-z_][A-Za-z0-9_]*, at most 256 bytes)");
}

TEST(ApiUtf8, TheWireRejectsInvalidUtf8AsInvalidJson) {
  EXPECT_EQ(job_error("{\"command\":[\"\xc0\x80\"]}"),
            "request: not valid JSON: line 1, column 35: syntax error while parsing value - invalid string: "
            "ill-formed UTF-8 byte");
  EXPECT_EQ(job_error(R"({"command":["\ud800"]})"),
            "request: not valid JSON: line 1, column 41: syntax error while parsing value - invalid string: "
            "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF");
  EXPECT_EQ(submitted(R"({"command":["\ud83d\ude00","\u00e9"]})").command,
            (std::vector<std::string>{"\xf0\x9f\x98\x80", "\xc3\xa9"}));
}

// --- to_json ---

TEST(ApiJson, RoundTrip) {
  for (const JobRequest& j : {full_job(), [] {
                                JobRequest minimal;
                                minimal.name = "m";
                                minimal.command = {"true"};
                                return minimal;
                              }()}) {
    ASSERT_EQ(validate_error(j), "<valid>");
    expect_same(submitted(to_json(j)), j);
  }
  EXPECT_EQ(to_json(full_job()),
            R"({"command":["/usr/bin/python3","train.py","--lr=0.1","quote \" backslash \\ tab \t é 中 😀"],)"
            R"("env":{"EMPTY":"","PYTHONUNBUFFERED":"1","_X9":"multi\nline"},"exclusive":true,"gpus":4,)"
            R"("hints":{"gpu_util":0.37,"sharing_score":2},"mem_mib":12288,"name":"resnet-50_v2.1",)"
            R"("tags":["team:vision","model=resnet","v1.2_a-b"],"workdir":"/home/ann/runs"})");
}

TEST(ApiJson, AnEmptyNameComesBackDefaulted) {
  JobRequest j = full_job();
  j.name.clear();
  EXPECT_EQ(submitted(to_json(j)).name, "python3");
}

TEST(ApiJson, ToJsonNeverThrowsOnInvalidUtf8) {
  JobRequest j = full_job();
  j.command = {"a\xff"};
  EXPECT_NE(to_json(j).find("\"command\":[\"a\xef\xbf\xbd\"]"), std::string::npos);
}

// --- notifications (issue 32 item 6) ---

TEST(ApiNotify, EventListsParseToOneCanonicalSpelling) {
  auto text = [](std::string_view in) {
    const auto r = parse_notify(in);
    if (const auto* e = std::get_if<std::string>(&r)) return "error: " + *e;
    return to_string(std::get<NotifySet>(r));
  };
  EXPECT_EQ(text(""), "");
  EXPECT_EQ(text("none"), "");
  EXPECT_EQ(text("end,start"), "start,end");
  EXPECT_EQ(text("start,start"), "start");
  EXPECT_EQ(text("oom,eta,cancel,fail"), "oom,fail,cancel,eta");
  EXPECT_EQ(text("all"), "start,oom,end,fail,cancel,eta");
  const std::string expected = "(expected a comma list of start, oom, end, fail, cancel, eta, or all or none)";
  EXPECT_EQ(text("bogus"), "error: unknown event 'bogus' " + expected);
  EXPECT_EQ(text("start,"), "error: unknown event '' " + expected);
  EXPECT_EQ(text("Start"), "error: unknown event 'Start' " + expected);
  EXPECT_EQ(text("start, end"), "error: unknown event ' end' " + expected);
  EXPECT_EQ(text("a\nb"), "error: unknown event 'a\\x0ab' " + expected);
}

TEST(ApiNotify, SubmitReadsAListOrAString) {
  EXPECT_TRUE(submitted(R"({"command":["true"]})").notify.empty());  // default: none
  EXPECT_EQ(to_string(submitted(R"({"command":["true"],"notify":["end","start"]})").notify), "start,end");
  EXPECT_EQ(to_string(submitted(R"({"command":["true"],"notify":"oom,fail"})").notify), "oom,fail");
  EXPECT_EQ(job_error(R"({"command":["true"],"notify":["start","bogus"]})"),
            "job.notify: unknown event 'bogus' (expected a comma list of start, oom, end, fail, cancel, eta, or all "
            "or none)");
  EXPECT_EQ(job_error(R"({"command":["true"],"notify":7})"),
            "job.notify: must be an array of event names or a string");
  EXPECT_EQ(job_error(R"({"command":["true"],"notify":[1]})"), "job.notify[0]: must be a string");
  EXPECT_EQ(to_string(yaml_job("command: [\"true\"]\nnotify: [start, end]\n").notify), "start,end");
  EXPECT_EQ(to_string(yaml_job("command: [\"true\"]\nnotify: all\n").notify), "start,oom,end,fail,cancel,eta");
  EXPECT_EQ(yaml_error("command: [\"true\"]\nnotify: [nope]\n").rfind("notify: unknown event 'nope'", 0), 0u);
  // The wire form round-trips.
  JobRequest j;
  j.command = {"true"};
  j.notify = std::get<NotifySet>(parse_notify("fail,start"));
  EXPECT_NE(to_json(j).find(R"("notify":"start,fail")"), std::string::npos) << to_json(j);
  EXPECT_EQ(to_string(submitted(to_json(j)).notify), "start,fail");
}

// --- memory sizes ---

TEST(ApiMemSize, Table) {
  const std::vector<std::pair<std::string, std::optional<MiB>>> cases = {
      {"12000", 12000},
      {"12000M", 12000},
      {"12000MB", 12000},
      {"12000MiB", 12000},
      {"12000mib", 12000},
      {"12000mB", 12000},
      {"12G", 12288},
      {"12GB", 12288},
      {"12GiB", 12288},
      {"12g", 12288},
      {"12gIb", 12288},
      {"1.5G", 1536},
      {"1.50G", 1536},
      {"0.1G", 103},            // 102.4 rounds up
      {"1.1M", 2},
      {"1.000000001", 2},       // nine places, exactly
      {"1T", 1048576},
      {"1TiB", 1048576},
      {"1P", 1073741824},
      {"1024T", 1073741824},
      {"1048576G", 1073741824},
      {"1073741824", 1073741824},
      {"512K", 1},
      {"1024K", 1},
      {"1025K", 2},
      {"1kib", 1},
      {"0.001K", 1},
      {"0001G", 1024},
      {"1.0", 1},
      {"", std::nullopt},
      {"0", std::nullopt},
      {"0.0G", std::nullopt},
      {"0K", std::nullopt},
      {"-1G", std::nullopt},
      {"+1G", std::nullopt},
      {"nan", std::nullopt},
      {"NaNG", std::nullopt},
      {"inf", std::nullopt},
      {"1e3", std::nullopt},
      {"0x10", std::nullopt},
      {"1073741825", std::nullopt},  // 1 PiB + 1 MiB
      {"1.000000001P", std::nullopt},
      {"1025T", std::nullopt},
      {"2P", std::nullopt},
      {"1099511627777K", std::nullopt},
      {"99999999999999999999999G", std::nullopt},
      {"1.0000000001", std::nullopt},  // ten places
      {"12 G", std::nullopt},
      {" 12G", std::nullopt},
      {"12G ", std::nullopt},
      {"12GG", std::nullopt},
      {"12Gi", std::nullopt},
      {"12GiBs", std::nullopt},
      {"12B", std::nullopt},
      {"G", std::nullopt},
      {".5G", std::nullopt},
      {"5.G", std::nullopt},
      {"1.2.3G", std::nullopt},
      {std::string("12\0G", 4), std::nullopt},
  };
  for (const auto& [text, mib] : cases) EXPECT_EQ(parse_mem_size(text), mib) << testing::PrintToString(text);
  EXPECT_EQ(parse_mem_size("1099511627776K"), 1073741824);
}

// --- YAML job specs ---

TEST(ApiYaml, FullSpec) {
  const JobRequest j = yaml_job(R"(# a job spec
name: bert-large
command: [python, -m, train, --epochs, 10]
workdir: /data//runs/./bert
env:
  OMP_NUM_THREADS: 4
  WANDB_MODE: "offline"
gpus: 2
mem: 12G
exclusive: true
tags: [nlp, "size=large"]
hints:
  gpu_util: 0.8
  sharing_score: 2
)");
  EXPECT_EQ(j.name, "bert-large");
  EXPECT_EQ(j.command, (std::vector<std::string>{"python", "-m", "train", "--epochs", "10"}));
  EXPECT_EQ(j.workdir, "/data/runs/bert");
  EXPECT_EQ(j.env, (std::map<std::string, std::string>{{"OMP_NUM_THREADS", "4"}, {"WANDB_MODE", "offline"}}));
  EXPECT_EQ(j.gpus, 2);
  EXPECT_EQ(j.mem_mib, 12288);
  EXPECT_TRUE(j.exclusive);
  EXPECT_EQ(j.tags, (std::vector<std::string>{"nlp", "size=large"}));
  EXPECT_EQ(j.hint_gpu_util, 0.8);
  EXPECT_EQ(j.hint_sharing_score, 2);
  expect_same(submitted(to_json(j)), j);
}

TEST(ApiYaml, CommandStringRunsUnderShAndWorkdirMayBeAbsent) {
  const JobRequest j = yaml_job("command: make -j8 && ./train --lr 0.1\nmem_mib: 2048\nexclusive: False\n");
  EXPECT_EQ(j.command, (std::vector<std::string>{"/bin/sh", "-c", "make -j8 && ./train --lr 0.1"}));
  EXPECT_EQ(j.name, "sh");
  EXPECT_EQ(j.workdir, "");
  EXPECT_EQ(j.mem_mib, 2048);
  EXPECT_FALSE(j.exclusive);
  EXPECT_EQ(yaml_job("command: [a]\nmem: 1500\n").mem_mib, 1500);
  EXPECT_EQ(yaml_job("command:\n  - sleep\n  - 1\n").command, (std::vector<std::string>{"sleep", "1"}));
}

TEST(ApiYaml, Errors) {
  const std::vector<Case> cases = {
      {"command: [a]\nuser: root\n", "user: unknown field"},
      {"command: [a]\ngpus: 0\n", "gpus: must be an integer between 1 and 64"},
      {"command: [a]\ngpus: \"2\"\n", "gpus: must be an integer between 1 and 64"},
      {"command: [a]\ngpus: 2.0\n", "gpus: must be an integer between 1 and 64"},
      {"command: [a]\ngpus: 99999999999999999999\n", "gpus: must be an integer between 1 and 64"},
      {"command: [a]\nexclusive: yes\n", "exclusive: must be true or false"},
      {"command: [a]\nexclusive: \"true\"\n", "exclusive: must be true or false"},
      {"command: {a: b}\n", "command: must be a list of strings or a string"},
      {"command: [a, [b]]\n", "command[1]: must be a string"},
      {"command: [a, ~]\n", "command[1]: must be a string"},
      {"command:\n", "command: must be a list of strings or a string"},
      {"name: x\n", "command: must have 1 to 4096 entries"},
      {"command: [a]\nname: a/b\n", "name: must match [A-Za-z0-9._-]{1,128}"},
      {"command: [a]\nworkdir: rel\n", "workdir: must be an absolute path"},
      {"command: [a]\nenv: [A]\n", "env: must be a mapping of strings"},
      {"command: [a]\nenv: {A: [1]}\n", "env.A: must be a string"},
      {"command: [a]\nenv: {CUDA_VISIBLE_DEVICES: 0}\n", "env.CUDA_VISIBLE_DEVICES: reserved: the daemon sets it"},
      {"command: [a]\nmem: 12X\n", "mem: not a memory size from 1M to 1P (such as 12000, 512M, 12G, 1.5GiB)"},
      {"command: [a]\nmem: 1G\nmem_mib: 1\n", "mem_mib: give either mem or mem_mib, not both"},
      {"command: [a]\ntags: [a b]\n", "tags[0]: must match [A-Za-z0-9._:=-]{1,64}"},
      {"command: [a]\nhints: {gpu_util: 2}\n", "hints.gpu_util: must be a number between 0 and 1"},
      {"command: [a]\nhints: {gpu_util: .nan}\n", "hints.gpu_util: must be a number between 0 and 1"},
      {"command: [a]\nhints: {x: 1}\n", "hints.x: unknown field"},
      {"command: [a]\nhints: 1\n", "hints: must be a mapping"},
      {"command: [\"a\\0b\"]\n", "command[0]: contains a NUL byte"},
      {"command: [\"\xff\"]\n", "command[0]: not valid UTF-8"},
      {"command: [a]\ncommand: [b]\n", "spec: line 2, column 1: duplicate key 'command'"},
      {"command: [a]\nenv: {A: 1, A: 2}\n", "spec: line 2, column 13: duplicate key 'A'"},
      {"command: [a]\n[x]: 1\n", "spec: line 2, column 1: keys must be strings"},
      {"command: &c [a]\ntags: *c\n", "spec: line 1, column 10: anchors and aliases are not allowed"},
      {"command: [a]\ntags: [&t x]\n", "spec: line 2, column 8: anchors and aliases are not allowed"},
      {"command: [a]\n---\ncommand: [b]\n", "spec: line 2, column 1: more than one YAML document"},
      {"command: [a\n", "spec: line 2, column 1: not valid YAML: end of sequence flow not found"},
      {"- a\n- b\n", "spec: must be a mapping of job fields"},
      {"just text\n", "spec: must be a mapping of job fields"},
      {"", "spec: must be a mapping of job fields"},
      {"# only a comment\n", "spec: must be a mapping of job fields"},
  };
  for (const auto& c : cases) EXPECT_EQ(yaml_error(c.input), c.expected) << c.input;
}

// A key of the model's features that is not UTF-8 (YAML passes any bytes): the error shows
// it escaped, one line a JSON reply can carry (found by fuzz_job_spec_yaml).
TEST(ApiYaml, AModelKeyThatIsNotUtf8IsShownEscaped) {
  const std::string e = yaml_error("command: [a]\nmodel:\n  g\xf1x: 1\n");
  EXPECT_EQ(e.rfind("model.g\\xf1x: unknown field (expected ", 0), 0u) << e;
  EXPECT_NO_THROW((void)nlohmann::json(e).dump());
}

// --- hostile inputs: rejected with a message, never a crash ---

TEST(ApiHostile, DeepNesting) {
  EXPECT_EQ(error_of(std::string(100000, '[')), "request: nested deeper than 16 levels");
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += R"({"a":)";
  EXPECT_EQ(error_of(objects), "request: nested deeper than 16 levels");
  // Brackets inside strings are text, not nesting; escaped quotes do not end a string.
  EXPECT_EQ(job_error(R"({"command":["[[[[[[[[[[[[[[[[[[[[\"{{{{{{{{{{{{{{{{{{{{{"]})"), "<accepted>");
  EXPECT_EQ(error_of(std::string(16, '[') + std::string(16, ']')), "request: must be a JSON object");
  EXPECT_EQ(error_of(std::string(17, '[') + std::string(17, ']')), "request: nested deeper than 16 levels");
  EXPECT_EQ(yaml_error(std::string(100000, '[')), "spec: line 1, column 1: keys must be strings");
  std::string dashes;
  for (int i = 0; i < 100000; ++i) dashes += "- ";
  EXPECT_EQ(yaml_error(dashes + "x"), "spec: line 1, column 33: nested deeper than 16 levels");
  // The spec's mapping is the first level.
  EXPECT_EQ(yaml_error("command: " + std::string(15, '[') + std::string(15, ']')), "command[0]: must be a string");
  EXPECT_EQ(yaml_error("command: " + std::string(16, '[') + std::string(16, ']')),
            "spec: line 1, column 25: nested deeper than 16 levels");
  // Unclosed, yaml-cpp reads the flow collections as a mapping's key before it fails.
  std::string maps;
  for (int i = 0; i < 50000; ++i) maps += "{a: ";
  EXPECT_EQ(yaml_error(maps), "spec: line 1, column 1: keys must be strings");
}

TEST(ApiHostile, Size) {
  std::string line = R"({"op":"ping"})";
  line.resize(kMaxRequestBytes, ' ');
  parsed<PingRequest>(line);
  line += ' ';
  EXPECT_EQ(error_of(line), "request: longer than 4194304 bytes");
  std::string spec = "command: [a]\n";
  spec.resize(1 << 20, '\n');
  EXPECT_EQ(yaml_error(spec), "<accepted>");
  spec += '\n';
  EXPECT_EQ(yaml_error(spec), "spec: longer than 1048576 bytes");
}

TEST(ApiHostile, HugeNumbers) {
  EXPECT_EQ(error_of(R"({"op":"show","id":1e999})"), "request: not valid JSON: number overflow parsing '1e999'");
  const std::string digits = "1" + std::string(100000, '0');
  const std::string e = error_of(R"({"op":"show","id":)" + digits + "}");
  EXPECT_EQ(e, "request: not valid JSON: number overflow parsing '" + digits.substr(0, 175) + "...");
  EXPECT_EQ(error_of(R"({"op":"show","id":)" + digits + ".5e-100000}"), "id: must be a positive 64-bit integer");
  EXPECT_EQ(job_error(R"({"command":["a"],"gpus":-9223372036854775809})"),
            "job.gpus: must be an integer between 1 and 64");
  EXPECT_EQ(job_error(R"({"command":["a"],"hints":{"gpu_util":1e-400}})"), "<accepted>");
}

TEST(ApiHostile, NulAndControlBytes) {
  EXPECT_EQ(error_of(std::string("{\"op\":\"ping\"}\0{\"op\":\"cancel\"}", 30)),
            "request: not valid JSON: contains a NUL byte");
  EXPECT_EQ(error_of(std::string("{\"op\":\"pi\0ng\"}", 14)), "request: not valid JSON: contains a NUL byte");
  EXPECT_EQ(error_of("{\"op\":\"pi\x01ng\"}"),
            "request: not valid JSON: line 1, column 10: syntax error while parsing value - invalid string: control "
            "character U+0001 (SOH) must be escaped to \\u0001");
  EXPECT_EQ(error_of(R"({"op":"pi\u0000ng"})"), "op: unknown operation 'pi\\x00ng'");
  EXPECT_EQ(error_of(R"({"op\u0000":"ping"})"), "op: required");
  EXPECT_EQ(error_of(R"({"op":"ping","a\u0000\n":1})"), "a\\x00\\x0a: unknown field");
}

TEST(ApiHostile, ErrorsAreShortSingleLinesWhateverTheInput) {
  const std::string long_op = std::string(10000, 'x') + "\\n";
  const std::string e = error_of(R"({"op":")" + long_op + "\"}");
  EXPECT_EQ(e, "op: unknown operation '" + std::string(64, 'x') + "...'");
  const std::string yaml = yaml_error("command: [a]\n\"\\n" + std::string(1000, 'k') + "\": 1\n");
  EXPECT_EQ(yaml, "\\x0a" + std::string(60, 'k') + "...: unknown field");
}

TEST(ApiHostile, BillionLaughs) {
  EXPECT_EQ(yaml_error("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\ncommand: *c\n"),
            "spec: line 1, column 4: anchors and aliases are not allowed");
}

// Issue 32 item 1: the priority level and the checkpoint warning, on the wire and in YAML.
TEST(ApiJob, PriorityAndCheckpointSignal) {
  const JobRequest j = submitted(R"({"command":["ls"],"priority":5,"checkpoint_signal":"USR1@120"})");
  EXPECT_EQ(j.priority, 5);
  EXPECT_EQ(j.checkpoint_signal, 10);  // SIGUSR1 on Linux
  EXPECT_EQ(j.checkpoint_lead_s, 120);
  const JobRequest defaults = submitted(R"({"command":["ls"]})");
  EXPECT_EQ(defaults.priority, 0);
  EXPECT_EQ(defaults.checkpoint_signal, 0);
  EXPECT_EQ(submitted(R"({"command":["ls"],"checkpoint_signal":"SIGUSR2@1"})").checkpoint_signal, 12);
  EXPECT_EQ(submitted(R"({"command":["ls"],"checkpoint_signal":"15@86400"})").checkpoint_signal, 15);
  EXPECT_EQ(submitted(R"({"command":["ls"],"priority":-1000})").priority, -1000);
  const std::vector<Case> cases = {
      {R"("priority":1001)", "job.priority: must be an integer between -1000 and 1000"},
      {R"("priority":"high")", "job.priority: must be an integer between -1000 and 1000"},
      {R"("priority":1.5)", "job.priority: must be an integer between -1000 and 1000"},
      {R"("checkpoint_signal":"USR1")", "job.checkpoint_signal: must be SIGNAL@SECONDS, such as USR1@120"},
      {R"("checkpoint_signal":"@120")", "job.checkpoint_signal: must be SIGNAL@SECONDS, such as USR1@120"},
      {R"("checkpoint_signal":"KILL@120")",
       "job.checkpoint_signal: 'KILL' is not a signal a job can catch here (HUP, INT, QUIT, USR1, USR2, ALRM, TERM, "
       "CONT, URG, WINCH); must be SIGNAL@SECONDS, such as USR1@120"},
      {R"("checkpoint_signal":"USR1@0")",
       "job.checkpoint_signal: the lead time must be a whole number of seconds from 1 to 86400; must be "
       "SIGNAL@SECONDS, such as USR1@120"},
      {R"("checkpoint_signal":"USR1@1.5")",
       "job.checkpoint_signal: the lead time must be a whole number of seconds from 1 to 86400; must be "
       "SIGNAL@SECONDS, such as USR1@120"},
      {R"("checkpoint_signal":120)", "job.checkpoint_signal: must be a string"},
  };
  for (const auto& c : cases) EXPECT_EQ(job_error(R"({"command":["ls"],)" + c.input + "}"), c.expected) << c.input;
  // Built elsewhere (the CLI), then checked by the same rules; and back through JSON.
  JobRequest built;
  built.command = {"ls"};
  built.priority = 2000;
  EXPECT_EQ(validate_error(built), "priority: must be an integer between -1000 and 1000");
  built.priority = 3;
  built.checkpoint_signal = 9;  // KILL cannot be caught
  built.checkpoint_lead_s = 10;
  EXPECT_NE(validate_error(built).find("checkpoint_signal: "), std::string::npos);
  built.checkpoint_signal = 10;
  EXPECT_EQ(validate_error(built), "<valid>");
  const JobRequest back = submitted(to_json(built));
  EXPECT_EQ(back.priority, 3);
  EXPECT_EQ(back.checkpoint_signal, 10);
  EXPECT_EQ(back.checkpoint_lead_s, 10);
  const JobRequest y = yaml_job("command: [ls]\npriority: 4\ncheckpoint_signal: USR1@60\n");
  EXPECT_EQ(y.priority, 4);
  EXPECT_EQ(y.checkpoint_lead_s, 60);
  EXPECT_EQ(yaml_error("command: [ls]\npriority: 99999\n"), "priority: must be an integer between -1000 and 1000");
}

}  // namespace
}  // namespace aegis::api

// `aegis submit --container IMAGE` (runtime/api/container.h): the image is checked before
// it reaches podman's command line, and the command keeps the job in its cgroup.
TEST(ContainerImage, TakesReferencesPodmanTakes) {
  for (const char* ok : {"busybox", "debian:12", "docker.io/library/debian:bookworm-slim", "localhost/aegis-test:1",
                         "registry.example.org:5000/lab/train:v1.2_cuda-12",
                         "quay.io/a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"})
    EXPECT_EQ(aegis::api::check_container_image(ok), std::nullopt) << ok;
}

TEST(ContainerImage, RefusesAnythingElseWithOneLineNamingTheField) {
  for (const char* bad : {"", "--privileged", "-v/:/host", "Debian", "debian:", "debian:-x", "a//b", "a/../b",
                          "debian;rm -rf /", "debian $(id)", "debian\nx", "x@sha256:12", "../etc", "a:b:c",
                          "debian:12 --privileged"}) {
    const auto e = aegis::api::check_container_image(bad);
    ASSERT_TRUE(e.has_value()) << bad;
    EXPECT_EQ(e->rfind("--container: ", 0), 0u) << *e;
    EXPECT_EQ(e->find('\n'), std::string::npos) << *e;
  }
  EXPECT_TRUE(aegis::api::check_container_image(std::string(300, 'a')).has_value());
}

TEST(ContainerImage, TheCommandStaysInTheJobsCgroupWithItsGpus) {
  std::string error;
  const auto argv =
      aegis::api::container_command("debian:12", {"python3", "train.py", "--lr", "0.1"}, "/home/ann/w", true, &error);
  EXPECT_TRUE(error.empty());
  ASSERT_GE(argv.size(), 6u);
  EXPECT_EQ(argv[0], "/usr/bin/podman");
  EXPECT_EQ(argv[1], "run");
  auto has = [&](const std::string& a) { return std::find(argv.begin(), argv.end(), a) != argv.end(); };
  EXPECT_TRUE(has("--cgroups=disabled"));  // no cgroup of its own: the job's cgroup holds it all
  EXPECT_TRUE(has("--userns=keep-id"));
  EXPECT_TRUE(has("/home/ann/w:/home/ann/w"));
  EXPECT_TRUE(has("nvidia.com/gpu=all"));  // the host's GPUs, through CDI
  EXPECT_FALSE(std::ranges::count(aegis::api::container_command("debian:12", {"x"}, "/w", false, &error), "nvidia.com/gpu=all"));
  // The GPU assignment passes through by name (the value aegisd sets at launch).
  const auto env = std::find(argv.begin(), argv.end(), "CUDA_VISIBLE_DEVICES");
  ASSERT_NE(env, argv.end());
  EXPECT_EQ(*(env - 1), "--env");
  // The image, then the command unchanged.
  const auto image = std::find(argv.begin(), argv.end(), "debian:12");
  ASSERT_NE(image, argv.end());
  EXPECT_EQ(std::vector<std::string>(image + 1, argv.end()),
            (std::vector<std::string>{"python3", "train.py", "--lr", "0.1"}));
  EXPECT_TRUE(aegis::api::container_command("debian:12", {"x"}, "/w:x", true, &error).empty());
  EXPECT_EQ(error.rfind("--workdir: ", 0), 0u);
}

namespace aegis::api {
namespace {

// --- issue 32 item 5: time limits (`time`, aegis submit --time) ---

TEST(ApiTimeLimit, EveryFormParses) {
  EXPECT_EQ(parse_time_limit("5400"), 5400);
  EXPECT_EQ(parse_time_limit("90m"), 5400);
  EXPECT_EQ(parse_time_limit("2h"), 7200);
  EXPECT_EQ(parse_time_limit("1d"), 86400);
  EXPECT_EQ(parse_time_limit("45s"), 45);
  EXPECT_EQ(parse_time_limit("1:30:00"), 5400);
  EXPECT_EQ(parse_time_limit("1-00:00:00"), 86400);
  EXPECT_EQ(parse_time_limit("2-12:00:01"), 2 * 86400 + 12 * 3600 + 1);
  for (const char* bad : {"", "0", "0m", "-5", "1.5h", "90x", "m", "1:60:00", "1:3:00", "1:30", "1-2", "366d",
                          "1:00:00:00", "12345678901", " 90m"})
    EXPECT_FALSE(parse_time_limit(bad)) << bad;
}

TEST(ApiTimeLimit, TheJobFieldTakesSecondsOrAStringAndNamesItselfWhenWrong) {
  EXPECT_EQ(submitted(R"({"command":["ls"],"time":"90m"})").time_limit_s, 5400);
  EXPECT_EQ(submitted(R"({"command":["ls"],"time":600})").time_limit_s, 600);
  EXPECT_FALSE(submitted(R"({"command":["ls"]})").time_limit_s);
  const std::string what = "job.time: must be a time limit from 1 s to 365 days (seconds, or such as 90m, 2h, 1-00:00:00)";
  for (const char* bad : {R"("time":0)", R"("time":"soon")", R"("time":1.5)", R"("time":true)", R"("time":31536001)"})
    EXPECT_EQ(job_error(std::string(R"({"command":["ls"],)") + bad + "}"), what) << bad;
  // Round trip, and the YAML spec reads it the same way.
  const JobRequest j = submitted(R"({"command":["ls"],"time":"1-00:00:00"})");
  EXPECT_EQ(submitted(to_json(j)).time_limit_s, 86400);
  EXPECT_EQ(yaml_job("command: [a]\ntime: 2h\n").time_limit_s, 7200);
  EXPECT_EQ(yaml_job("command: [a]\ntime: 30\n").time_limit_s, 30);
  JobRequest v = submitted(R"({"command":["ls"]})");
  v.time_limit_s = 0;
  EXPECT_EQ(validate_error(v), "time: must be an integer between 1 and 31536000");
}
TEST(ApiRequest, QueueEta) {  // issue 32 item 5: aegis queue --eta
  EXPECT_TRUE(parsed<ListRequest>(R"({"op":"queue","eta":true})").eta);
  EXPECT_FALSE(parsed<ListRequest>(R"({"op":"queue"})").eta);
  EXPECT_EQ(error_of(R"({"op":"queue","eta":1})"), "eta: must be true or false");
}

// Issue 33 item 1: a listing carries the fields the client asks for; an unknown one is named.
TEST(ApiRequest, ListingFields) {
  EXPECT_TRUE(parsed<ListRequest>(R"({"op":"queue"})").fields.empty());
  EXPECT_EQ(parsed<ListRequest>(R"({"op":"queue","fields":["name","state"]})").fields,
            (std::vector<std::string>{"name", "state"}));
  EXPECT_EQ(parsed<HistoryRequest>(R"({"op":"history","fields":["id","ended_at"]})").fields,
            (std::vector<std::string>{"id", "ended_at"}));
  EXPECT_EQ(error_of(R"({"op":"queue","fields":["name","bogus"]})"),
            "fields: unknown field 'bogus' (known: id, name, user, state, ...; docs/api.md)");
  EXPECT_EQ(error_of(R"({"op":"history","fields":["env"]})"),
            "fields: unknown field 'env' (known: id, name, user, state, ...; docs/api.md)");
  EXPECT_EQ(error_of(R"({"op":"queue","fields":"name"})"), "fields: must be an array of 1 to 30 field names");
  EXPECT_EQ(error_of(R"({"op":"queue","fields":[]})"), "fields: must be an array of 1 to 30 field names");
  EXPECT_EQ(error_of(R"({"op":"queue","fields":[1]})"), "fields[0]: must be a string");
  // A hostile name comes back printable, never raw.
  EXPECT_EQ(error_of("{\"op\":\"queue\",\"fields\":[\"a\\u001b[2Jb\"]}").find('\x1b'), std::string::npos);
}

// Issue 33 item 1: the request as a listing shows it: no environment, argv and workdir cut.
TEST(ApiRequest, ListingJsonCutsLongStrings) {
  JobRequest r = submitted(R"({"command":["ls"]})");
  r.command = {"python3", std::string(5000, 'a'), "never-shown"};
  r.workdir = "/" + std::string(3000, 'w');
  r.env = {{"SECRET", "s3cr3t"}};
  std::vector<std::string> cut;
  const std::string text = to_listing_json(r, 100, cut);
  EXPECT_LT(text.size(), 400u) << text;
  EXPECT_EQ(text.find("s3cr3t"), std::string::npos);
  EXPECT_EQ(text.find("never-shown"), std::string::npos);
  EXPECT_NE(text.find(std::string("python3\",\"") + std::string(93, 'a') + kCutMarker + "\""), std::string::npos) << text;
  EXPECT_EQ(cut, (std::vector<std::string>{"request.workdir", "request.command"}));
  // Short strings pass whole; a cut never splits a UTF-8 character.
  cut.clear();
  r.command = {"ls", "-l"};
  r.workdir = "/tmp";
  EXPECT_NE(to_listing_json(r, 100, cut).find(R"("command":["ls","-l"])"), std::string::npos);
  EXPECT_TRUE(cut.empty());
  // Model features past the limit are left out whole, and named.
  cut.clear();
  r.model = ModelFeatures{};
  r.model->activation = std::string(200, 'g');
  EXPECT_EQ(to_listing_json(r, 100, cut).find("ggg"), std::string::npos);
  EXPECT_EQ(cut, (std::vector<std::string>{"request.model"}));
  EXPECT_EQ(cut_string("ab\u00e9cd", 3), std::string("ab") + kCutMarker);
  EXPECT_EQ(cut_string("abc", 3), "abc");
}

}  // namespace
}  // namespace aegis::api

// --- issue 32 items 3-4: arrays, dependencies, wait ---
namespace aegis::api {
namespace {

std::vector<int> indices_of(std::string_view text) {
  const auto r = parse_array(text);
  if (const auto* e = std::get_if<ParseError>(&r)) {
    ADD_FAILURE() << text << ": " << e->message;
    return {};
  }
  return std::get<ArraySpec>(r).indices;
}

std::string array_error(std::string_view text) {
  const auto r = parse_array(text, "--array");
  const auto* e = std::get_if<ParseError>(&r);
  return e ? e->message : "<accepted>";
}

TEST(ApiArrays, RangesListsAndTheCap) {
  EXPECT_EQ(indices_of("0-3"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(indices_of("1,3,5-7"), (std::vector<int>{1, 3, 5, 6, 7}));
  EXPECT_EQ(indices_of("7"), (std::vector<int>{7}));
  const auto r = parse_array("0-49%8");
  ASSERT_TRUE(std::holds_alternative<ArraySpec>(r));
  EXPECT_EQ(std::get<ArraySpec>(r).indices.size(), 50u);
  EXPECT_EQ(std::get<ArraySpec>(r).limit, 8);
  EXPECT_EQ(std::get<ArraySpec>(parse_array("0-9")).limit, 0);
  EXPECT_EQ(indices_of("0-999").size(), kMaxArrayElements);
}

TEST(ApiArrays, BadSyntaxIsOneLineNamingTheField) {
  const std::vector<Case> cases = {
      {"5-2", "--array: '5-2': range 5-2 goes down"},
      {"0-100000", "--array: '0-100000': more than 1000 elements"},
      {"0-9%0", "--array: '0-9%0': the cap after % must be a whole number from 1 to 1000"},
      {"0-9%", "--array: '0-9%': the cap after % must be a whole number from 1 to 1000"},
      {"", "--array: empty: give indices such as 0-49, 1,3,5-9 or 0-49%8"},
      {"a-b", "--array: 'a-b': 'a-b' is not an index or a range such as 0-49"},
      {"-1", "--array: '-1': '-1' is not an index or a range such as 0-49"},
      {"1,", "--array: '1,': ends with a comma"},
      {"1,1", "--array: '1,1': index 1 given twice"},
      {"2000000", "--array: '2000000': indices go up to 999999"},
  };
  for (const auto& c : cases) EXPECT_EQ(array_error(c.input), c.expected) << c.input;
}

TEST(ApiArrays, SubmitCarriesArrayAndAfterAndChecksThem) {
  const JobRequest j = submitted(R"({"command":["python","t.py","--seed","{i}"],"array":"0-3%2","after":["5","6:any"]})");
  EXPECT_EQ(j.array, "0-3%2");
  EXPECT_EQ(j.after, (std::vector<std::string>{"5", "6:any"}));
  EXPECT_EQ(job_error(R"({"command":["x"],"array":"5-2"})"), "job.array: '5-2': range 5-2 goes down");
  EXPECT_EQ(job_error(R"({"command":["x"],"array":3})"), "job.array: must be a string");
  EXPECT_EQ(job_error(R"({"command":["x"],"after":["x1"]})"),
            "job.after[0]: 'x1': must be a job id, then :ok, :any or :failed");
  EXPECT_EQ(job_error(R"({"command":["x"],"after":["4:maybe"]})"),
            "job.after[0]: '4:maybe': the condition after ':' must be ok, any or failed");
  EXPECT_EQ(job_error(R"({"command":["x"],"after":["0"]})"),
            "job.after[0]: '0': must be a job id, then :ok, :any or :failed");
  // Round trip through to_json.
  const JobRequest back = submitted(to_json(j));
  EXPECT_EQ(back.array, j.array);
  EXPECT_EQ(back.after, j.after);
}

TEST(ApiArrays, AnElementsRequestHasItsIndex) {
  JobRequest j;
  j.command = {"python", "train.py", "--seed", "{i}", "--out=run{i}/{i}.pt"};
  j.array = "0-3";
  const JobRequest e = element_request(j, 12);
  EXPECT_EQ(e.command, (std::vector<std::string>{"python", "train.py", "--seed", "12", "--out=run12/12.pt"}));
  EXPECT_EQ(e.env.at("AEGIS_ARRAY_INDEX"), "12");
  EXPECT_TRUE(e.array.empty());
}

TEST(ApiArrays, WaitTakesIds) {
  EXPECT_EQ(parsed<WaitRequest>(R"({"op":"wait","ids":[3,4]})").ids, (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(error_of(R"({"op":"wait","ids":[]})"), "ids: must be an array of 1 to 1000 ids");
  EXPECT_EQ(error_of(R"({"op":"wait"})"), "ids: required");
}

}  // namespace
}  // namespace aegis::api

import Foundation
import TimerdCluster
import TimerdSystem

/// 5. Cluster mode (issue #24, docs/cluster.md): N timerd nodes on a real etcd on loopback share J webhook
/// jobs each due every second (J fires/s offered, phases spread evenly) to `HookCounter`, which counts
/// what is delivered, and whether any fire was delivered twice.
struct ClusterResult: Codable {
    var nodes: Int
    var etcd_members: Int
    /// Where etcd kept its data (under the results directory), and that directory's file system.
    var etcd_data: String
    var etcd_file_system: String
    var jobs: Int
    var offered_per_second: Double
    /// Scheduled instants counted: those due in [window start, window start + seconds).
    var seconds: Double
    /// Until every node listed every node as a member.
    var formed_seconds: Double
    var register_seconds: Double
    /// Each `ADD`'s round trip: job i's grid starts within it of its target phase i/J.
    var add_ms: Summary?
    var expected_fires: Int
    /// Distinct (job, scheduled instant) due in the window and received by `grace_seconds` after its end.
    var delivered: Int
    var delivered_per_second: Double
    var missed: Int
    var grace_seconds: Double
    /// Requests received while the window lasted, whatever their instant.
    var received_per_second: Double
    /// Requests for a (job, instant) already received: among the window's instants, and over the whole run.
    var duplicates_in_window: Int
    var duplicates: Int
    var duplicate_examples: [String]
    /// Requests whose body had no job or instant.
    var malformed: Int
    /// Due instant → request received at the target (first delivery of each fire of the window).
    var due_to_received_ms: Summary?
    /// The jobs' phases (`next_fire` of each in node 1's `LIST` after registering, within the second) in
    /// ten 100 ms buckets: the fullest over the mean (1.0: perfectly even).
    var phase_peak_over_mean: Double?
    var node_results: [ClusterNodeResult]
    /// Whether the nodes' `CLUSTER` had `claims` (the claim transactions' own counts and round trip).
    var claims_reported: Bool
    /// The floor: 200 sequential claim-shaped etcd transactions from this program (timerd's own etcd
    /// client) right after the window, while the jobs still fire, and again once the nodes stopped.
    var client_txn_ms: Summary?
    var client_txn_idle_ms: Summary?
    /// CPU seconds each etcd member used in the window.
    var etcd_cpu_seconds: [Double]
    var load_average: Double?
}

struct ClusterNodeResult: Codable {
    var name: String
    /// `role` in its `CLUSTER` once the cluster was formed.
    var role: String?
    /// Runs that ended on this node in the window (its `STATS` `runs`, all results), and the failed ones.
    var runs: Int
    var failed: Int
    /// Its share of all nodes' runs in the window.
    var share: Double?
    /// Fires it skipped in the window (its `STATS` `skipped`).
    var skipped: Int
    var cpu_seconds: Double
    var claims: ClaimCounts?
}

/// `claims` of `CLUSTER`: transactions and fires claimed in the window (differences), and the
/// transactions' round trip percentiles at its end.
struct ClaimCounts: Codable {
    var transactions: Int
    var fires: Int
    var p50_ms: Double?
    var p99_ms: Double?
}

func wallNanoseconds() -> Int64 {
    let now = SystemClock.wallClockNow()
    return now.seconds * 1_000_000_000 + Int64(now.nanoseconds)
}

/// The `start` (ns) of an `every=1s` job added now whose fires fall at `phase` ns into each wall-clock
/// second: between 1 and 2 s from now (its grid starts when timerd handles the `ADD`).
func startForPhase(_ phase: Int64) -> Int64 {
    ((phase - wallNanoseconds() % 1_000_000_000) % 1_000_000_000 + 1_000_000_000) % 1_000_000_000 + 1_000_000_000
}

/// Sleeps until the wall clock reads `ns` (since the epoch).
func sleepUntilWall(_ ns: Int64) {
    let left = ns - wallNanoseconds()
    if left > 0 { Measure.sleep(seconds: Double(left) / 1e9) }
}

/// A request's `OK {…}` reply as a JSON object.
func jsonReply(_ client: BenchClient, _ request: String) throws -> [String: Any] {
    let reply = try client.request(request)
    guard reply.hasPrefix("OK "), let object = try? JSONSerialization.jsonObject(with: Data(reply.utf8.dropFirst(3))) as? [String: Any] else {
        throw BenchError("\(request): \(reply.prefix(300))")
    }
    return object
}

func jsonNumber(_ value: Any?) -> Double? { (value as? NSNumber)?.doubleValue }

func runCluster(_ setup: Setup, etcd etcdBinary: String, nodes count: Int, jobs: Int, seconds: Double) throws -> ClusterResult {
    let directory = "\(setup.out)/cluster-\(count)"
    try? FileManager.default.removeItem(atPath: directory)
    try FileSystem.makeDirectories(directory)
    let etcd = try BenchEtcd(binary: etcdBinary, members: count == 1 ? 1 : 3, directory: "\(directory)/etcd")
    defer { etcd.stop() }
    let server = try HookCounter()
    defer { server.stop() }

    let names = (1...count).map { "n\($0)" }
    let prefix = "/timerd-bench-\(getpid())/"
    var nodes: [BenchDaemon] = []
    defer { stopAll(nodes) }
    let started = Measure.now()
    for name in names {
        nodes.append(try BenchDaemon(timerd: setup.timerd, workDirectory: directory, name: name, config: """
            # Written by timerd-bench for the cluster scenario (\(count) nodes).
            [daemon]
            max_running = 1000
            log = stderr

            [cluster]
            etcd = \(etcd.clientURLs.joined(separator: ", "))
            node = \(name)
            prefix = \(prefix)
            lease_ttl = 10s

            """))
    }
    let clients = try nodes.map { try BenchClient(socket: $0.socket) }

    // Formed: every node is a member and lists every node in `members`.
    var infos: [[String: Any]] = []
    while true {
        infos = try clients.map { try jsonReply($0, "CLUSTER") }
        let everyone = infos.allSatisfy { info in
            let members = (info["members"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
            return Set(members) == Set(names) && !["connecting", "unavailable"].contains(info["role"] as? String ?? "")
        }
        if everyone { break }
        if Measure.seconds(since: started) > 60 {
            throw BenchError("the cluster did not form within 60 s; CLUSTER: \(infos.map { "\($0)" }.joined(separator: "; ")); logs in \(directory)")
        }
        usleep(50_000)
    }
    let formed = Measure.seconds(since: started)

    // One request at a time, not pipelined: an `every` job's grid starts when the node handles its ADD,
    // and each shared ADD waits for etcd, so `start` is computed as each is sent to put job i's fires at
    // i/J of the second (within one ADD's round trip).
    let registerStart = Measure.now()
    var addMilliseconds: [Double] = []
    for index in 0..<jobs {
        let phase = Int64(index) * 1_000_000_000 / Int64(jobs)
        let sent = Measure.now()
        let start = startForPhase(phase)
        let reply = try clients[0].request("ADD c\(index) every=1s start=\(start)ns tag=cluster webhook=http://127.0.0.1:\(server.port)/hook")
        guard reply == "OK" else { throw BenchError("ADD c\(index): \(reply)") }
        addMilliseconds.append(Measure.seconds(since: sent) * 1000)
    }
    let registerSeconds = Measure.seconds(since: registerStart)
    // The phases the nodes scheduled, as node 1 lists them.
    var buckets = [Int](repeating: 0, count: 10)
    let listed = try clients[0].request("LIST")
    if listed.hasPrefix("OK "), let list = try? JSONSerialization.jsonObject(with: Data(listed.utf8.dropFirst(3))) as? [[String: Any]] {
        for job in list {
            guard let next = job["next_fire"] as? String, let ns = HookCounter.nanoseconds(rfc3339: next) else { continue }
            buckets[Int(ns % 1_000_000_000 / 100_000_000)] += 1
        }
    }
    let phased = buckets.reduce(0, +)
    // Every job has fired at least once (first fires within 2 s of its ADD) before the window opens.
    Measure.sleep(seconds: 3)

    let windowStart = (wallNanoseconds() / 1_000_000_000 + 1) * 1_000_000_000
    let whole = max(1, Int(seconds.rounded()))
    let windowEnd = windowStart + Int64(whole) * 1_000_000_000
    sleepUntilWall(windowStart)
    let statsBefore = try clients.map { try jsonReply($0, "STATS") }
    let clusterBefore = try clients.map { try jsonReply($0, "CLUSTER") }
    let cpuBefore = try nodes.map { try $0.probe.cpuSeconds() }
    let etcdCPUBefore = etcd.pids.map { (try? ProcessProbe(pid: $0).cpuSeconds()) ?? 0 }
    sleepUntilWall(windowEnd)
    let statsAfter = try clients.map { try jsonReply($0, "STATS") }
    let clusterAfter = try clients.map { try jsonReply($0, "CLUSTER") }
    let cpu = try nodes.indices.map { try nodes[$0].probe.cpuSeconds() - cpuBefore[$0] }
    let etcdCPU = etcd.pids.indices.map { ((try? ProcessProbe(pid: etcd.pids[$0]).cpuSeconds()) ?? 0) - etcdCPUBefore[$0] }
    let load = Measure.loadAverage()

    let claimsReported = clusterAfter.contains { $0["claims"] is [String: Any] }
    let grace = 3.0
    // The floor: the round trip of a claim-shaped transaction as a client sees it, in the same load.
    let clientTxn = try etcdTxnRoundTrips(etcd.clientURLs, key: prefix + "bench-txn/", count: 200)
    sleepUntilWall(windowEnd + Int64(grace * 1e9))
    let deliveries = server.received
    let roles = try clients.map { try jsonReply($0, "CLUSTER")["role"] as? String }
    stopAll(nodes)
    nodes = []
    let clientTxnIdle = try etcdTxnRoundTrips(etcd.clientURLs, key: prefix + "bench-txn/", count: 200)

    // Deliveries: duplicates over the whole run, the window's fires, how late they arrived.
    struct Fire: Hashable {
        var job: String
        var at: Int64
    }
    var seen = Set<Fire>()
    var duplicates = 0
    var examples: [String] = []
    var inWindow = 0
    var duplicatesInWindow = 0
    var lateness: [Double] = []
    var received = 0
    for delivery in deliveries {
        let fire = Fire(job: delivery.job, at: delivery.scheduledNs)
        let first = seen.insert(fire).inserted
        if !first {
            duplicates += 1
            if examples.count < 5 { examples.append("\(delivery.job) due at \(delivery.scheduledNs) ns") }
        }
        if delivery.receivedNs >= windowStart && delivery.receivedNs < windowEnd { received += 1 }
        guard delivery.scheduledNs >= windowStart && delivery.scheduledNs < windowEnd else { continue }
        inWindow += 1
        if first { lateness.append(Double(delivery.receivedNs - delivery.scheduledNs) / 1e6) } else { duplicatesInWindow += 1 }
    }
    let delivered = inWindow - duplicatesInWindow
    let expected = jobs * whole

    func runs(_ stats: [String: Any]) -> (all: Int, failed: Int) {
        let counts = stats["runs"] as? [String: Any] ?? [:]
        let value = { (key: String) in Int(jsonNumber(counts[key]) ?? 0) }
        return (value("ok") + value("failed") + value("timeout") + value("killed"), value("failed") + value("timeout") + value("killed"))
    }
    let nodeRuns = names.indices.map { runs(statsAfter[$0]).all - runs(statsBefore[$0]).all }
    let totalRuns = nodeRuns.reduce(0, +)
    let nodeResults = names.indices.map { index in
        let before = statsBefore[index], after = statsAfter[index]
        var claims: ClaimCounts?
        if let end = clusterAfter[index]["claims"] as? [String: Any] {
            let start = clusterBefore[index]["claims"] as? [String: Any] ?? [:]
            claims = ClaimCounts(
                transactions: Int((jsonNumber(end["transactions"]) ?? 0) - (jsonNumber(start["transactions"]) ?? 0)),
                fires: Int((jsonNumber(end["fires"]) ?? 0) - (jsonNumber(start["fires"]) ?? 0)),
                p50_ms: jsonNumber(end["p50_ms"]), p99_ms: jsonNumber(end["p99_ms"]))
        }
        return ClusterNodeResult(
            name: names[index], role: roles[index], runs: nodeRuns[index],
            failed: runs(after).failed - runs(before).failed,
            share: totalRuns > 0 ? Double(nodeRuns[index]) / Double(totalRuns) : nil,
            skipped: Int((jsonNumber(after["skipped"]) ?? 0) - (jsonNumber(before["skipped"]) ?? 0)),
            cpu_seconds: cpu[index], claims: claims)
    }
    return ClusterResult(
        nodes: count, etcd_members: etcd.clientURLs.count,
        etcd_data: etcd.directory, etcd_file_system: fileSystemOf(etcd.directory), jobs: jobs, offered_per_second: Double(jobs),
        seconds: Double(whole), formed_seconds: formed, register_seconds: registerSeconds,
        add_ms: Summary(milliseconds: addMilliseconds),
        expected_fires: expected, delivered: delivered, delivered_per_second: Double(delivered) / Double(whole),
        missed: max(0, expected - delivered), grace_seconds: grace, received_per_second: Double(received) / Double(whole),
        duplicates_in_window: duplicatesInWindow, duplicates: duplicates, duplicate_examples: examples,
        malformed: server.malformed.get(), due_to_received_ms: Summary(milliseconds: lateness),
        phase_peak_over_mean: phased == 0 ? nil : Double(buckets.max()!) / (Double(phased) / 10),
        node_results: nodeResults, claims_reported: claimsReported,
        client_txn_ms: Summary(milliseconds: clientTxn), client_txn_idle_ms: Summary(milliseconds: clientTxnIdle),
        etcd_cpu_seconds: etcdCPU, load_average: load)
}

/// SIGTERM to every node at once, then waits for each (`BenchDaemon.stop`).
private func stopAll(_ nodes: [BenchDaemon]) {
    for node in nodes { _ = try? node.child.signal(.term) }
    for node in nodes { node.stop() }
}

/// `count` sequential transactions shaped like timerd's claim of a fire (docs/cluster.md, "Claims"):
/// compare a member key's create revision and the claim key's mod revision, put the claim; through
/// timerd's own etcd client (libcurl, reused connections). Their round trips in ms.
func etcdTxnRoundTrips(_ endpoints: [String], key: String, count: Int) throws -> [Double] {
    let client = try EtcdClient(endpoints: endpoints, requestTimeout: .seconds(5))
    let memberKey = key + "members/timerd-bench", claimKey = key + "claims/job"
    let created = try client.txn(
        compare: [.createRevision(memberKey, equals: 0)], success: [.put(memberKey, value: Array("timerd-bench".utf8))],
        failure: [.get(memberKey)])
    guard let memberRevision = created.succeeded ? created.revision : created.ranges.first?.first?.createRevision else {
        throw BenchError("etcd: cannot create \(memberKey)")
    }
    var known = try client.get(claimKey).kvs.first?.modRevision ?? 0
    var samples: [Double] = []
    for index in 0..<count {
        let value = Array("{\"at\":\(wallNanoseconds()),\"node\":\"timerd-bench-\(index)\"}".utf8)
        let start = Measure.now()
        let result = try client.txn(
            compare: [.createRevision(memberKey, equals: memberRevision), .modRevision(claimKey, equals: known)],
            success: [.put(claimKey, value: value)], failure: [.get(memberKey), .get(claimKey)])
        samples.append(Measure.seconds(since: start) * 1000)
        guard result.succeeded else { throw BenchError("etcd: a claim-shaped transaction failed its compare") }
        known = result.revision
    }
    return samples
}

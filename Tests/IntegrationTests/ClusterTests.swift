import Foundation
import Glibc
import Testing
import TimerdCluster

/// Cluster mode (docs/cluster.md) end to end: a real 3-member etcd cluster on loopback and three real
/// timerd nodes, each with its own socket, state and log. Runs are counted at their target: every run of
/// the shared job appends `SCHEDULED_AT NODE STARTED` to one file all nodes write to.
final class ClusterFixture: @unchecked Sendable {
    static let leaseTTL = 3
    let etcd: EtcdCluster
    let directory: String
    let nodeNames = ["a", "b", "c"]
    private(set) var nodes: [Daemon] = []
    let runsFile: String

    /// `jobs` is appended to each node's config; `$RUNS` in it is the runs file.
    init(jobs: String = "") throws {
        etcd = try EtcdCluster()
        directory = try makeTemporaryDirectory()
        runsFile = directory + "/runs"
        let prefix = "/timerd-test-\(getpid())-\(UUID().uuidString.prefix(8))/"
        for name in nodeNames {
            configs.append("""
                [cluster]
                etcd = \(etcd.clientURLs.joined(separator: ","))
                node = \(name)
                prefix = \(prefix)
                lease_ttl = \(Self.leaseTTL)s
                \(jobs.replacingOccurrences(of: "$RUNS", with: runsFile))
                """)
            // Outside the node's own directory, which goes with its `Daemon` (see `restart`).
            nodes.append(try Daemon(config: configs.last!, stateDirectory: directory + "/state-" + name))
        }
    }

    private var configs: [String] = []

    /// Stops node `index` and starts it again on the same config and state directory.
    func restart(_ index: Int) throws {
        nodes[index].stop()
        nodes[index] = try Daemon(config: configs[index], stateDirectory: nodes[index].stateDirectory)
    }

    deinit {
        for node in nodes { node.stop(signal: SIGKILL) }
        if ProcessInfo.processInfo.environment["TIMERD_TEST_KEEP"] == nil {
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    func index(of name: String) -> Int { nodeNames.firstIndex(of: name)! }

    /// `CLUSTER` of node `index`, decoded; nil when it does not answer OK.
    func cluster(_ index: Int) -> [String: Any]? {
        guard let reply = try? nodes[index].request("CLUSTER"), reply.hasPrefix("OK ") else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(reply.dropFirst(3).utf8)) as? [String: Any]
    }

    /// Waits until every node in `among` names the same leader, one of them; returns its index.
    func waitForLeader(among: [Int]? = nil, timeout: Double = 15) throws -> Int {
        let candidates = among ?? Array(nodes.indices)
        var leader: String?
        let agreed = eventually(timeout: timeout, "the nodes to agree on a leader") {
            let views = candidates.map { cluster($0)?["leader"] as? String }
            guard let first = views.first ?? nil, views.allSatisfy({ $0 == first }), candidates.contains(index(of: first)),
                  cluster(index(of: first))?["role"] as? String == "leader" else { return false }
            leader = first
            return true
        }
        guard agreed, let leader else {
            throw HarnessError("no agreed leader within \(timeout)s: " + candidates.map { "\(nodeNames[$0]): \(cluster($0) ?? [:])" }.joined(separator: "; "))
        }
        return index(of: leader)
    }

    /// An ADD line for a shared job that appends a line per run to `runsFile`.
    func addLine(_ name: String, every: String = "1s", extra: String = "") -> String {
        #"ADD \#(name) every=\#(every) \#(extra) command="echo $TIMERD_JOB $TIMERD_SCHEDULED_AT $TIMERD_NODE $(date +%s.%N) >> \#(runsFile)""#
    }

    struct Run: Equatable {
        var job: String
        var scheduled: String
        var node: String
        var started: Double
    }

    func runs(_ job: String) -> [Run] {
        let text = (try? String(contentsOfFile: runsFile, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ").map(String.init)
            guard words.count == 4, words[0] == job, let started = Double(words[3]) else { return nil }
            return Run(job: words[0], scheduled: words[1], node: words[2], started: started)
        }
    }

    /// Each scheduled instant ran at most once.
    func expectNoDuplicates(_ job: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let instants = runs(job).map(\.scheduled)
        let duplicates = Dictionary(grouping: instants, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
        #expect(duplicates.isEmpty, "instants run more than once: \(duplicates); runs: \(runs(job))", sourceLocation: sourceLocation)
    }

    static func seconds(_ rfc3339: String) -> Double {
        // 2026-11-30T01:02:03.456789Z
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: rfc3339)?.timeIntervalSince1970 ?? .nan
    }
}

@Suite("Cluster mode on etcd", .serialized)
struct ClusterTests {
    @Test func aSharedJobFiresExactlyOncePerInstantAcrossTheCluster() throws {
        let cluster = try ClusterFixture()
        let leader = try cluster.waitForLeader()
        let other = (leader + 1) % 3
        let third = (leader + 2) % 3
        // Added on a node that does not lead: every node sees it, the leader runs it.
        #expect(try cluster.nodes[other].request(cluster.addLine("tick")) == "OK")
        for index in cluster.nodes.indices {
            #expect(try eventually(timeout: 1, "node \(index) to list tick") { try cluster.nodes[index].listNames().contains("tick") })
        }
        #expect(eventually(timeout: 15, "six runs of tick") { cluster.runs("tick").count >= 6 })
        cluster.expectNoDuplicates("tick")
        let runs = cluster.runs("tick")
        #expect(Set(runs.map(\.node)) == [cluster.nodeNames[leader]])
        // One run per second: the instants are consecutive grid times.
        let instants = runs.map { ClusterFixture.seconds($0.scheduled) }
        for (earlier, later) in zip(instants, instants.dropFirst()) { #expect(abs(later - earlier - 1) < 0.001, "\(instants)") }
        // show names the node that runs it on every node; history on a follower has the leader's runs.
        for index in cluster.nodes.indices {
            let info = try cluster.nodes[index].show("tick")
            #expect(info["node"] as? String == cluster.nodeNames[leader])
            #expect(info["cluster"] as? Bool == true)
        }
        #expect(try eventually(timeout: 3, "the follower's history to have the leader's runs") {
            let reply = try cluster.nodes[third].request("HISTORY tick limit=3")
            return reply.contains("\"node\":\"\(cluster.nodeNames[leader])\"")
        })
        // PAUSE on a third node stops it everywhere within a second; RESUME starts it again.
        #expect(try cluster.nodes[third].request("PAUSE tick") == "OK")
        for index in cluster.nodes.indices {
            #expect(try eventually(timeout: 1, "node \(index) to see tick paused") { try cluster.nodes[index].state("tick") == "paused" })
        }
        #expect(try cluster.nodes[other].request("RESUME tick") == "OK")
        #expect(try eventually(timeout: 1, "the leader to see tick resumed") { try cluster.nodes[leader].state("tick") == "scheduled" })
        // A second ADD of the name anywhere in the cluster is refused.
        #expect(try cluster.nodes[third].request(cluster.addLine("tick")).hasPrefix("ERR exists "))
        // CANCEL on any node removes it from every node.
        let cancelled = try cluster.nodes[third].request("CANCEL tick")
        #expect(cancelled == "OK", "\(cluster.nodes[third].log.suffix(4000))")
        for index in cluster.nodes.indices {
            #expect(try eventually(timeout: 1, "node \(index) to drop tick") { try !cluster.nodes[index].listNames().contains("tick") })
        }
        cluster.expectNoDuplicates("tick")
        // MODE switches every node.
        #expect(try cluster.nodes[other].request("MODE maintenance").hasPrefix("OK "))
        for index in cluster.nodes.indices {
            #expect(try eventually(timeout: 1, "node \(index) to switch mode") { try cluster.nodes[index].request("MODE").contains("\"mode\":\"maintenance\"") })
        }
    }

    @Test func configJobsMarkedClusterRunOnTheLeaderOnlyTheOthersOnEveryNode() throws {
        let cluster = try ClusterFixture(jobs: #"""
            [job "report"]
            every = 1s
            cluster = yes
            command = echo $TIMERD_JOB $TIMERD_SCHEDULED_AT $TIMERD_NODE $(date +%s.%N) >> $RUNS
            [job "cleanup"]
            every = 1s
            command = echo $TIMERD_JOB $TIMERD_SCHEDULED_AT $TIMERD_NODE $(date +%s.%N) >> $RUNS
            """#)
        let leader = try cluster.waitForLeader()
        #expect(eventually(timeout: 10, "cleanup to run on every node and report four times") {
            Set(cluster.runs("cleanup").map(\.node)).count == 3 && cluster.runs("report").count >= 4
        })
        let report = cluster.runs("report")
        // Before the leader was known no node ran it; after, only the leader.
        #expect(Set(report.map(\.node)) == [cluster.nodeNames[leader]], "\(report)")
        cluster.expectNoDuplicates("report")
        #expect(try cluster.nodes[(leader + 1) % 3].show("report")["node"] as? String == cluster.nodeNames[leader])
        #expect(try cluster.nodes[(leader + 1) % 3].show("cleanup")["node"] as? String == cluster.nodeNames[(leader + 1) % 3])
    }

    @Test func aLeaderStoppedWithSIGTERMHandsOverAtOnce() throws {
        let cluster = try ClusterFixture()
        let leader = try cluster.waitForLeader()
        #expect(try cluster.nodes[leader].request(cluster.addLine("hand")) == "OK")
        #expect(eventually(timeout: 10, "two runs of hand") { cluster.runs("hand").count >= 2 })
        let stoppedAt = Date().timeIntervalSince1970
        #expect(cluster.nodes[leader].stop() == 0)
        let oldName = cluster.nodeNames[leader]
        // The lease is revoked on the way out: no waiting for lease_ttl.
        #expect(eventually(timeout: 5, "another node to run hand") { cluster.runs("hand").contains { $0.node != oldName } })
        let first = try #require(cluster.runs("hand").first { $0.node != oldName })
        print("cluster handover after SIGTERM: first run on node \(first.node) \(String(format: "%.2f", first.started - stoppedAt)) s after the stop")
        #expect(first.started - stoppedAt < Double(ClusterFixture.leaseTTL) - 0.5)
        #expect(cluster.nodes[leader].logShows("lease revoked"))
        cluster.expectNoDuplicates("hand")
    }

    @Test func nodesTalkToEtcdOverTLSWithAClientCertificate() throws {
        let ca = try ThrowawayCA(client: true)
        let etcd = try EtcdCluster(members: 1, tls: ca)
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func node(_ name: String, certificate: Bool) throws -> Daemon {
            try Daemon(config: """
                [cluster]
                etcd = \(etcd.tlsURLs[0])
                node = \(name)
                lease_ttl = 3s
                ca_file = \(ca.caCertificate)
                \(certificate ? "cert_file = \(ca.clientCertificate)\nkey_file = \(ca.clientKey)" : "")
                """)
        }
        let good = try node("tls", certificate: true)
        #expect(eventually(timeout: 10, "the node to lead over TLS") {
            (try? good.request("CLUSTER"))?.contains("\"role\":\"leader\"") == true
        }, "\((try? good.request("CLUSTER")) ?? "")\n\(good.log.suffix(1500))\n\(etcd.log(member: 0).suffix(1500))")
        #expect(try good.request(#"ADD secure every=1s command="echo $TIMERD_NODE >> \#(directory)/runs""#) == "OK")
        #expect(eventually(timeout: 5, "the job to run") { FileManager.default.fileExists(atPath: directory + "/runs") })
        // Without a client certificate etcd refuses the node, and it says so.
        let refused = try node("anonymous", certificate: false)
        #expect(eventually(timeout: 10, "the node without a certificate to report etcd unavailable") {
            (try? refused.request("CLUSTER"))?.contains("\"role\":\"unavailable\"") == true
        })
        #expect(try refused.request(#"ADD other every=1s command=true"#).hasPrefix("ERR cluster-unavailable "))
    }

    @Test func aFrozenEtcdMemberChangesNothingEither() throws {
        let cluster = try ClusterFixture()
        let leader = try cluster.waitForLeader()
        let follower = (leader + 1) % 3
        #expect(try cluster.nodes[follower].request(cluster.addLine("still")) == "OK")
        #expect(eventually(timeout: 10, "two runs of still") { cluster.runs("still").count >= 2 })
        // The member etcd's raft leader is on hangs with its connections open: etcd elects another leader
        // (a second or two without writes), and timerd's requests and watches must move on.
        let statuses = try EtcdClient(endpoints: cluster.etcd.clientURLs).status()
        let raftLeader = try #require(statuses.firstIndex { $0.healthy && $0.leaderID == $0.memberID }, "\(statuses)")
        cluster.etcd.freeze(member: raftLeader, true)
        defer { cluster.etcd.freeze(member: raftLeader, false) }
        let added = Date()
        let reply = try cluster.nodes[follower].request(cluster.addLine("later", every: "2s"))
        #expect(reply == "OK", "\(reply)")
        // Every node's watch notices it has gone quiet and moves on: the change reaches all of them.
        for index in cluster.nodes.indices {
            #expect(try eventually(timeout: Double(ClusterFixture.leaseTTL) * 2 + 2, "node \(index) to list later") {
                try cluster.nodes[index].listNames().contains("later")
            })
        }
        print("cluster: with the etcd raft leader's member frozen, a change reached every node in \(String(format: "%.2f", Date().timeIntervalSince(added))) s")
        let before = cluster.runs("still").count
        #expect(eventually(timeout: 10, "still to go on running") { cluster.runs("still").count >= before + 3 })
        #expect(try cluster.waitForLeader() == leader, "the leadership did not move")
        cluster.expectNoDuplicates("still")
    }

    @Test func aNodeStartsWithoutEtcdServesItsOwnJobsAndRefusesSharedChanges() throws {
        let port = try unusedLoopbackPort()
        let config = "[cluster]\netcd = http://127.0.0.1:\(port)\nnode = alone\nlease_ttl = 3s\n"
        // READY=1 without etcd (the harness waits for it): timerd does not wait for etcd to start.
        let daemon = try Daemon(config: config)
        #expect(eventually(timeout: 5, "the node to report etcd unavailable") {
            (try? daemon.request("CLUSTER"))?.contains("\"role\":\"unavailable\"") == true
        })
        let started = Date()
        let refused = try daemon.request("ADD shared every=1m command=true")
        #expect(refused.hasPrefix("ERR cluster-unavailable etcd is unavailable ("), "\(refused)")
        // It kept trying for a while first (an etcd leader election would be over by then).
        #expect(Date().timeIntervalSince(started) >= 2.5)
        #expect(try daemon.request("ADD own every=1m cluster=no command=true") == "OK")
        #expect(try daemon.listNames() == ["own"])
        // [cluster] is read at start only; a reload says so and changes nothing else.
        try daemon.writeConfig(config.replacingOccurrences(of: "lease_ttl = 3s", with: "lease_ttl = 5s"))
        _ = try daemon.reload()
        #expect(daemon.logShows("the [cluster] section changed; it takes effect when timerd restarts"))
    }

    @Test func clusterOutsideClusterModeIsAClearError() throws {
        let daemon = try Daemon()
        #expect(try daemon.request("CLUSTER") == "ERR bad-argument timerd is not in cluster mode: its config has no [cluster] section (docs/cluster.md)")
        let result = try daemon.ctl("cluster")
        #expect(result.status == 1 && result.stderr.contains("not in cluster mode"))
    }

    @Test func killingTheLeaderMovesTheJobsWithinTheLeaseAndRunsOneCatchUp() throws {
        let cluster = try ClusterFixture()
        let leader = try cluster.waitForLeader()
        #expect(try cluster.nodes[leader].request(cluster.addLine("beat", extra: "misfire=once misfire_grace=1s")) == "OK")
        #expect(eventually(timeout: 10, "three runs of beat") { cluster.runs("beat").count >= 3 })
        let killedAt = Date().timeIntervalSince1970
        kill(cluster.nodes[leader].process.processIdentifier, SIGKILL)
        let oldName = cluster.nodeNames[leader]
        let limit = Double(ClusterFixture.leaseTTL) + 1
        #expect(eventually(timeout: limit + 5, "another node to run beat") { cluster.runs("beat").contains { $0.node != oldName } })
        #expect(eventually(timeout: 5, "two more runs after the takeover") { cluster.runs("beat").filter { $0.node != oldName }.count >= 3 })
        let runs = cluster.runs("beat")
        cluster.expectNoDuplicates("beat")
        let old = runs.filter { $0.node == oldName }
        let new = runs.filter { $0.node != oldName }
        try #require(!old.isEmpty && !new.isEmpty, "runs: \(runs)")
        let failover = new[0].started - killedAt
        print("cluster failover: first run on node \(new[0].node) \(String(format: "%.2f", failover)) s after kill -9 of the leader (lease_ttl \(ClusterFixture.leaseTTL)s)")
        #expect(failover <= limit, "failover took \(failover) s")
        // misfire=once: of the fires missed while no node led, exactly one ran (the latest), at once.
        let lastOld = old.map { ClusterFixture.seconds($0.scheduled) }.max()!
        let firstNew = ClusterFixture.seconds(new[0].scheduled)
        let takeover = new[0].started
        #expect(firstNew - lastOld >= 1.999, "fires were missed (last old \(lastOld), first new \(firstNew))")
        let inGap = runs.filter { let at = ClusterFixture.seconds($0.scheduled); return at > lastOld && at <= takeover }
        #expect(inGap.count == 1, "one catch-up run for the missed fires: \(inGap)")
        // After it, one run per second on schedule.
        let later = new.dropFirst().map { ClusterFixture.seconds($0.scheduled) }
        for (earlier, next) in zip(later, later.dropFirst()) { #expect(abs(next - earlier - 1) < 0.001) }
    }

    @Test func aSharedChainRunsEachTriggeredFireOnceOnTheLeaderAcrossAFailover() throws {
        let cluster = try ClusterFixture()
        let leader = try cluster.waitForLeader()
        let other = (leader + 1) % 3
        #expect(try cluster.nodes[leader].request(cluster.addLine("up")) == "OK")
        #expect(try eventually(timeout: 1, "node \(other) to list up") { try cluster.nodes[other].listNames().contains("up") })
        // A follower with a schedule of its own as well (hourly, not due in this test), added on another node.
        let follow = #"ADD down after=up every=1h command="echo down-$TIMERD_TRIGGERED_BY $TIMERD_SCHEDULED_AT $TIMERD_NODE $(date +%s.%N) >> \#(cluster.runsFile)""#
        #expect(try cluster.nodes[other].request(follow) == "OK")
        #expect(eventually(timeout: 10, "three triggered runs of down") { cluster.runs("down-up").count >= 3 })
        let before = cluster.runs("down-up")
        #expect(Set(before.map(\.node)) == [cluster.nodeNames[leader]], "\(before)")
        // Each claimed under the instant its upstream's run ended: after that run's own instant.
        let ups = cluster.runs("up").map { ClusterFixture.seconds($0.scheduled) }
        for run in before { #expect(ups.contains { abs(ClusterFixture.seconds(run.scheduled) - $0 - 0.5) < 0.5 }, "\(run) after \(ups)") }

        kill(cluster.nodes[leader].process.processIdentifier, SIGKILL)
        let oldName = cluster.nodeNames[leader]
        #expect(eventually(timeout: Double(ClusterFixture.leaseTTL) + 10, "another node to run down twice") {
            cluster.runs("down-up").filter { $0.node != oldName }.count >= 2
        })
        cluster.expectNoDuplicates("up")
        cluster.expectNoDuplicates("down-up")
        let after = cluster.runs("down-up").filter { $0.node != oldName }
        #expect(Set(after.map(\.node)).count == 1, "one new leader runs it: \(after)")
        // Never more triggered runs than upstream runs (each run of up that succeeded fires down once).
        #expect(cluster.runs("down-up").count <= cluster.runs("up").count)
    }

    @Test func cancellingMoreSharedJobsThanATransactionHoldsRemovesThemAll() throws {
        let cluster = try ClusterFixture()
        let leader = try cluster.waitForLeader()
        let other = (leader + 1) % 3
        // Each has a claim and a last run in etcd: with its job key, more than etcd takes in one transaction.
        for index in 0..<60 { #expect(try cluster.nodes[other].request(cluster.addLine("bulk\(index)", extra: "tag=bulk")) == "OK") }
        #expect(eventually(timeout: 10, "each job to run") { (0..<60).allSatisfy { !cluster.runs("bulk\($0)").isEmpty } })
        let reply = try cluster.nodes[other].request("CANCEL tag=bulk")
        #expect(reply.hasPrefix("OK"), "\(reply)")
        for index in cluster.nodes.indices {
            #expect(try eventually(timeout: 2, "node \(index) to drop them") { try !cluster.nodes[index].listNames().contains { $0.hasPrefix("bulk") } })
        }
        // Their names are free again in the cluster.
        #expect(try cluster.nodes[leader].request(cluster.addLine("bulk7")) == "OK")
        // More than one transaction holds: refused whole, with what to do.
        for index in 0..<130 { #expect(try cluster.nodes[other].request(cluster.addLine("many\(index)", every: "1h", extra: "tag=many")) == "OK") }
        for verb in ["CANCEL", "PAUSE"] {
            let refused = try cluster.nodes[leader].request("\(verb) tag=many")
            #expect(refused.hasPrefix("ERR bad-argument the request selects 130 shared jobs; a cluster changes at most 128"), "\(refused)")
        }
        #expect(try cluster.nodes[other].listNames().filter { $0.hasPrefix("many") }.count == 130)
        #expect(try cluster.nodes[other].show("many0")["state"] as? String == "scheduled")
    }

    @Test func aLeaderPausedPastItsLeaseDoesNotFireTwiceWhenItWakes() throws {
        let cluster = try ClusterFixture()
        let leader = try cluster.waitForLeader()
        let oldName = cluster.nodeNames[leader]
        #expect(try cluster.nodes[leader].request(cluster.addLine("pulse", extra: "misfire=all")) == "OK")
        #expect(eventually(timeout: 10, "two runs of pulse") { cluster.runs("pulse").count >= 2 })
        let pid = cluster.nodes[leader].process.processIdentifier
        kill(pid, SIGSTOP)
        let stoppedAt = Date().timeIntervalSince1970
        let others = cluster.nodes.indices.filter { $0 != leader }
        let newLeader = try cluster.waitForLeader(among: others, timeout: Double(ClusterFixture.leaseTTL) + 10)
        #expect(eventually(timeout: 10, "the new leader to run pulse twice") {
            cluster.runs("pulse").filter { $0.node == cluster.nodeNames[newLeader] }.count >= 2
        })
        kill(pid, SIGCONT)
        // It wakes with overdue timers and a lease that has expired: it must notice before claiming.
        #expect(eventually(timeout: 10, "the woken node to follow") { cluster.cluster(leader)?["role"] as? String == "follower" })
        let countAtWake = cluster.runs("pulse").count
        #expect(eventually(timeout: 10, "two more runs") { cluster.runs("pulse").count >= countAtWake + 2 })
        cluster.expectNoDuplicates("pulse")
        let lateByOld = cluster.runs("pulse").filter { $0.node == oldName && $0.started > stoppedAt + 0.5 }
        #expect(lateByOld.isEmpty, "the paused node ran after waking: \(lateByOld)")
        #expect(cluster.nodes[leader].logShows("no longer leads"))
    }

    @Test func oneEtcdMemberDownChangesNothingAndTwoDownStopSharedWritesUntilTheyReturn() throws {
        let cluster = try ClusterFixture()
        let leader = try cluster.waitForLeader()
        let follower = (leader + 1) % 3
        #expect(try cluster.nodes[follower].request(cluster.addLine("steady")) == "OK")
        #expect(eventually(timeout: 10, "two runs of steady") { cluster.runs("steady").count >= 2 })

        // One member down (the first URL, where every node starts): writes and runs go on.
        cluster.etcd.stop(member: 0)
        #expect(try cluster.nodes[follower].request(cluster.addLine("second", every: "2s")) == "OK")
        let before = cluster.runs("steady").count
        #expect(eventually(timeout: 10, "steady to go on running") { cluster.runs("steady").count >= before + 3 })
        #expect(eventually(timeout: 5, "second to run") { !cluster.runs("second").isEmpty })
        #expect(try cluster.nodes[follower].request("CANCEL second") == "OK")
        #expect(try cluster.waitForLeader() == leader, "the leadership did not move")
        let endpoints = cluster.cluster(follower)?["etcd"] as? [[String: Any]] ?? []
        #expect(endpoints.filter { $0["healthy"] as? Bool == false }.count == 1, "\(endpoints)")

        // Two down: no quorum. Reads are served; shared writes fail clearly; shared jobs stop.
        cluster.etcd.stop(member: 1)
        for index in cluster.nodes.indices {
            #expect(eventually(timeout: Double(ClusterFixture.leaseTTL) + 5, "node \(index) to report etcd unavailable") {
                cluster.cluster(index)?["role"] as? String == "unavailable"
            })
        }
        let stoppedCount = cluster.runs("steady").count
        let refused = try cluster.nodes[follower].request(cluster.addLine("third"))
        #expect(refused.hasPrefix("ERR cluster-unavailable "), "\(refused)")
        #expect(try cluster.nodes[follower].request("PAUSE steady").hasPrefix("ERR cluster-unavailable "))
        #expect(try cluster.nodes[follower].listNames().contains("steady"))
        #expect(try cluster.nodes[leader].show("steady")["state"] as? String == "scheduled")
        let status = try cluster.nodes[leader].ctl("cluster")
        #expect(status.status == 0 && status.stdout.contains("etcd unavailable"), "\(status.stdout)")
        // A local job keeps running meanwhile: the node is alive, only shared jobs wait for etcd.
        #expect(try cluster.nodes[leader].request(#"ADD local every=1s cluster=no command="echo local >> \#(cluster.runsFile).local""#) == "OK")
        #expect(eventually(timeout: 5, "the local job to run twice") {
            ((try? String(contentsOfFile: cluster.runsFile + ".local", encoding: .utf8)) ?? "").split(separator: "\n").count >= 2
        })
        #expect(cluster.runs("steady").count <= stoppedCount + 1, "steady ran without etcd: \(cluster.runs("steady").suffix(3))")
        #expect(cluster.nodes[follower].notify.waitFor("STATUS=cluster: etcd unavailable", prefix: true, timeout: 5))
        #expect(cluster.nodes[follower].logShows("etcd is unavailable"))
        // A node restarted meanwhile still knows the shared jobs, from its state.db.
        try cluster.restart(follower)
        #expect(try cluster.nodes[follower].listNames().contains("steady"))
        #expect(eventually(timeout: 5, "the restarted node to report etcd unavailable") {
            cluster.cluster(follower)?["role"] as? String == "unavailable"
        })

        // They return: writes work again and the shared job runs again, still once per instant.
        try cluster.etcd.start(member: 0)
        try cluster.etcd.start(member: 1)
        #expect(eventually(timeout: 20, "a shared write to succeed again") {
            (try? cluster.nodes[follower].request(cluster.addLine("third", every: "5s"))) == "OK"
        })
        let resumed = cluster.runs("steady").count
        #expect(eventually(timeout: 15, "steady to run again") { cluster.runs("steady").count >= resumed + 2 })
        cluster.expectNoDuplicates("steady")
    }
}

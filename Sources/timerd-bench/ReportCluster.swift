import Foundation

/// The cluster scenario in the report (issue #24): a summary table of its targets, and a section with
/// everything each run measured.
extension Report {
    /// The cluster results in the output directory (`cluster-N.json`), fewest nodes first.
    func clusterResults() -> [ClusterResult] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: out)) ?? []
        return names.filter { $0.hasPrefix("cluster-") && $0.hasSuffix(".json") }
            .compactMap { load(ClusterResult.self, $0) }
            .sorted { $0.nodes < $1.nodes }
    }

    /// Issue #24's table. Like issue #19's, a measure this run has no result for says so, and a target
    /// whose load was not offered (a smaller `--cluster-loads`) is neither met nor missed.
    func clusterTable() -> String {
        let results = clusterResults()
        let one = results.first { $0.nodes == 1 }
        let three = results.first { $0.nodes == 3 }
        var rows: [(measure: String, value: String, target: String, met: Bool?)] = []
        let grace = fmt(results.first?.grace_seconds ?? 3, 0)

        func rate(_ result: ClusterResult?) -> String {
            guard let result else { return notMeasured }
            var text = "\(fmt(result.delivered_per_second, 0)) /s of \(fmt(result.offered_per_second, 0)) offered "
            text += "(requests arriving meanwhile: \(fmt(result.received_per_second, 0)) /s); "
            text += "\(result.missed) of \(result.expected_fires) fires missed"
            if let late = result.due_to_received_ms { text += "; due → received p99 \(ms(late.p99)) ms" }
            return text
        }
        /// Every fire offered delivered (99.9%), at the target's load at least.
        func sustained(_ result: ClusterResult?, _ load: Double) -> Bool? {
            guard let result, result.offered_per_second >= load else { return nil }
            return Double(result.delivered) >= 0.999 * Double(result.expected_fires)
        }
        rows.append(("Shared fires/s delivered (by \(grace) s after the window), 1 node", rate(one), "≥ 2,000 /s (≥ 99.9% of the fires due)", sustained(one, 2_000)))
        rows.append((
            "Shared fires/s delivered (by \(grace) s after the window), 3 nodes", rate(three), "3,000 /s offered, all delivered (≥ 99.9%), each once",
            sustained(three, 3_000).map { $0 && three!.duplicates == 0 }))
        rows.append((
            "Each node's share of the runs, 3 nodes",
            three.map { $0.node_results.map { "\($0.name) \($0.share.map { fmt($0 * 100, 1) + "%" } ?? "–")" }.joined(separator: ", ") } ?? notMeasured,
            "each between 1/5 and 1/2",
            three.map { $0.node_results.allSatisfy { ($0.share ?? 0) >= 0.2 && ($0.share ?? 0) <= 0.5 } }))
        rows.append((
            "Fires delivered twice (whole run, counted at the target)",
            results.isEmpty ? notMeasured : results.map { "\(nodes($0)): \($0.duplicates)" }.joined(separator: "; "),
            "0", results.isEmpty ? nil : results.allSatisfy { $0.duplicates == 0 }))

        // The nodes' own claim counters (`CLUSTER` `claims`), beside the floor: a claim-shaped etcd
        // transaction timed from this program.
        func claimLatency(_ result: ClusterResult) -> String {
            let claiming = result.node_results.filter { ($0.claims?.transactions ?? 0) > 0 }
            guard result.claims_reported, !claiming.isEmpty else { return "\(nodes(result)): –" }
            return "\(nodes(result)): " + claiming.map {
                "\($0.name) \($0.claims?.p50_ms.map(ms) ?? "–") / \($0.claims?.p99_ms.map(ms) ?? "–") ms"
            }.joined(separator: ", ")
        }
        rows.append((
            "Claim round trip p50 / p99 (the nodes' `CLUSTER` `claims`)",
            results.isEmpty ? notMeasured : results.map(claimLatency).joined(separator: "; "), "–", nil))
        rows.append((
            "… the floor: etcd txn round trip from a client, p50 / p99 (200 claim-shaped, during the load)",
            results.isEmpty ? notMeasured : results.map { "\(nodes($0)): \($0.client_txn_ms.map { "\(ms($0.p50)) / \(ms($0.p99)) ms" } ?? "–")" }.joined(separator: "; "),
            "–", nil))
        rows.append((
            "Fires per claim transaction",
            results.isEmpty ? notMeasured : results.map { result in
                let transactions = result.node_results.reduce(0) { $0 + ($1.claims?.transactions ?? 0) }
                let fires = result.node_results.reduce(0) { $0 + ($1.claims?.fires ?? 0) }
                return "\(nodes(result)): " + (result.claims_reported && transactions > 0 ? fmt(Double(fires) / Double(transactions), 1) : "–")
            }.joined(separator: "; "),
            "–", nil))

        var text = "## Issue #24: cluster\n\n"
        text += "Shared webhook jobs each due every second, phases spread evenly, to a loopback HTTP server in timerd-bench "
        text += "that counts each (job, due instant) it receives; the nodes share a real etcd on loopback (1 member for "
        text += "1 node, 3 for 3). Details in \"Cluster\" below.\n\n"
        text += "| Measure | timerd | Target | Met? |\n|---|---|---|---|\n"
        for row in rows {
            text += "| \(row.measure) | \(row.value) | \(row.target) | \(row.met.map { $0 ? "yes" : "no" } ?? "–") |\n"
        }
        return text + "\n"
    }

    func nodes(_ result: ClusterResult) -> String { "\(result.nodes) node\(result.nodes == 1 ? "" : "s")" }

    /// Everything each cluster run measured, one column per run.
    func clusterSection() -> String {
        let results = clusterResults()
        guard !results.isEmpty else { return "" }
        var rows: [(String, (ClusterResult) -> String)] = [
            ("etcd", { "\($0.etcd_members) member\($0.etcd_members == 1 ? "" : "s") on loopback, data in `\($0.etcd_data)` on \($0.etcd_file_system)" }),
            ("Offered", { "\($0.jobs) webhook jobs every second (\(self.fmt($0.offered_per_second, 0)) fires/s)" }),
            ("Cluster formed after start (every node lists every member)", { "\(self.fmt($0.formed_seconds, 2)) s" }),
            ("Registering (one `ADD` at a time on node 1); each `ADD`'s round trip p50 / p99 / max", {
                "\(self.fmt($0.register_seconds, 1)) s (\(self.fmt(Double($0.jobs) / $0.register_seconds, 0)) /s); "
                    + self.triple($0.add_ms) + ($0.add_ms == nil ? "" : " ms")
            }),
            ("Phases (`next_fire` in `LIST`): fullest 100 ms of the second ÷ mean", { $0.phase_peak_over_mean.map { self.fmt($0, 2) } ?? "–" }),
            ("Window (fires due in it)", { "\(self.fmt($0.seconds, 0)) s (\($0.expected_fires))" }),
            ("Fires of the window delivered by \(fmt(results[0].grace_seconds, 0)) s after its end; the others (missed)", { "\($0.delivered) (\(self.fmt($0.delivered_per_second, 0)) /s); \($0.missed)" }),
            ("Requests received while the window lasted", { "\(self.fmt($0.received_per_second, 0)) /s" }),
            ("Delivered twice: fires of the window; whole run", { "\($0.duplicates_in_window); \($0.duplicates)" + ($0.duplicate_examples.isEmpty ? "" : " (\($0.duplicate_examples.joined(separator: ", ")))") }),
            ("Due → received p50 / p90 / p99 / max", { self.quad($0.due_to_received_ms) + ($0.due_to_received_ms == nil ? "" : " ms") }),
            ("Requests without job or instant", { "\($0.malformed)" }),
        ]
        for index in 0..<(results.map(\.nodes).max() ?? 0) {
            rows.append(("Node \(index + 1): role; runs ended (share), failed; fires skipped; CPU", { result in
                guard index < result.node_results.count else { return "" }
                let node = result.node_results[index]
                return "\(node.name) \(node.role ?? "–"); \(node.runs) (\(node.share.map { self.fmt($0 * 100, 1) + "%" } ?? "–")), "
                    + "\(node.failed); \(node.skipped); \(self.fmt(node.cpu_seconds, 1)) s"
            }))
        }
        rows.append(("Claims (`CLUSTER` `claims`): transactions, fires, p50 / p99", { result in
            guard result.claims_reported else { return "not in `CLUSTER`" }
            return result.node_results.compactMap { node in
                node.claims.map { "\(node.name) \($0.transactions), \($0.fires), \($0.p50_ms.map(self.ms) ?? "–") / \($0.p99_ms.map(self.ms) ?? "–") ms" }
            }.joined(separator: "; ")
        }))
        rows.append(("etcd txn round trip from a client, p50 / p99 / max: during the load; nodes stopped", { result in
            return "\(self.triple(result.client_txn_ms)) ms; \(self.triple(result.client_txn_idle_ms)) ms"
        }))
        rows.append(("etcd CPU in the window (per member)", { $0.etcd_cpu_seconds.map { "\(self.fmt($0, 1)) s" }.joined(separator: ", ") }))
        rows.append(("Load at the window's end", { $0.load_average.map { self.fmt($0, 2) } ?? "–" }))

        var text = "## Cluster: shared webhook fires\n\n"
        text += "N timerd nodes (`lease_ttl = 10s`, `max_running = 1000`) share webhook jobs each due every second, phases "
        text += "spread evenly, added on node 1. The target, a loopback HTTP server in timerd-bench, answers 200 at once and "
        text += "records the job and `scheduled_at` of each request's body: a fire is delivered when its (job, instant) "
        text += "arrives; one that arrives again is a duplicate. Runs per node are the differences of each node's `STATS` "
        text += "over the window, their claims the differences of each node's `CLUSTER` `claims`. As a floor, 200 "
        text += "claim-shaped etcd transactions (compare a member key's create revision and the claim key's mod revision, "
        text += "put the claim) are timed from timerd-bench through timerd's own etcd client.\n\n"
        text += "| Measure | " + results.map(nodes).joined(separator: " | ") + " |\n"
        text += "|---|" + results.map { _ in "---|" }.joined() + "\n"
        for (measure, value) in rows {
            text += "| \(measure) | " + results.map(value).joined(separator: " | ") + " |\n"
        }
        return text + "\n"
    }
}

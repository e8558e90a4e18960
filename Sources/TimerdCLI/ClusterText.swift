import TimerdProtocol

/// `cluster`'s block for a ``ClusterInfo`` reply. Pure.
///
/// ```
/// node:     a (member)
/// lease:    694d7f3e2c1a0b09, ttl 10s, 8.2s left
/// members:  a  pid 812  runs 101 jobs  tags ssd
///           b  pid 813  runs 99 jobs
/// jobs:     200 shared, under /timerd/
/// claims:   1520 fires in 412 transactions, round trip p50 2.1 ms, p99 6.3 ms
/// etcd:     http://127.0.0.1:2379  healthy  etcd-1, raft leader, 3.4.23
///           http://127.0.0.1:2479  unavailable: connection refused
/// ```
package enum ClusterText {
    package static func block(_ info: ClusterInfo) -> String {
        var lines: [(String, String)] = []
        let role = info.role == "unavailable" ? "etcd unavailable" : info.role
        lines.append(("node", "\(info.node) (\(role))"))
        if let problem = info.problem { lines.append(("problem", problem)) }
        if !info.tags.isEmpty { lines.append(("tags", info.tags.joined(separator: ", "))) }
        if let lease = info.lease {
            let left = info.lease_remaining.map { $0 > 0 ? ", " + StatsText.fixed($0, decimals: 1) + "s left" : ", not renewed in time (expired?)" } ?? ""
            lines.append(("lease", "\(lease), ttl \(info.lease_ttl)s\(left)"))
        } else {
            lines.append(("lease", "none (ttl \(info.lease_ttl)s)"))
        }
        let nameWidth = info.members.map(\.name.count).max() ?? 0
        let pidWidth = info.members.map { $0.pid.map { "pid \($0)" }?.count ?? 0 }.max() ?? 0
        let runsWidth = info.members.map { "runs \($0.jobs.counted("job"))".count }.max() ?? 0
        func padded(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(0, width - text.count)) }
        for (index, member) in info.members.enumerated() {
            var text = padded(member.name, nameWidth) + "  " + padded(member.pid.map { "pid \($0)" } ?? "", pidWidth) + "  "
                + padded("runs \(member.jobs.counted("job"))", runsWidth)
            if !member.tags.isEmpty { text += "  tags " + member.tags.joined(separator: ", ") }
            while text.hasSuffix(" ") { text.removeLast() }
            lines.append((index == 0 ? "members" : "", text))
        }
        if info.members.isEmpty { lines.append(("members", "none known")) }
        var jobs = "\(info.shared_jobs) shared, under \(info.prefix)"
        if info.waiting_jobs > 0 { jobs += "; \(info.waiting_jobs) waiting: no node runs \(info.waiting_jobs == 1 ? "it" : "them") now (show says why)" }
        lines.append(("jobs", jobs))
        if let claims = info.claims {
            lines.append(("claims", "\(claims.fires.counted("fire")) in \(claims.transactions.counted("transaction")), round trip p50 "
                          + StatsText.fixed(claims.p50_ms, decimals: 1) + " ms, p99 " + StatsText.fixed(claims.p99_ms, decimals: 1) + " ms"))
        }
        for (index, endpoint) in info.etcd.enumerated() {
            var text = endpoint.url + "  "
            if endpoint.healthy {
                let details = [endpoint.member, endpoint.is_leader ? "raft leader" : nil, endpoint.version].compactMap { $0 }
                text += "healthy" + (details.isEmpty ? "" : "  " + details.joined(separator: ", "))
            } else {
                text += "unavailable" + (endpoint.error.map { ": \($0)" } ?? "")
            }
            lines.append((index == 0 ? "etcd" : "", text))
        }
        let width = lines.map(\.0.count).max()! + 3
        return lines.map { label, value in
            let head = label.isEmpty ? "" : label + ":"
            return head + String(repeating: " ", count: width - head.count) + value + "\n"
        }.joined()
    }
}

import TimerdProtocol

/// `cluster`'s block for a ``ClusterInfo`` reply. Pure.
///
/// ```
/// node:     a (leader)
/// leader:   a
/// lease:    694d7f3e2c1a0b09, ttl 10s, 8.2s left
/// members:  a (pid 812), b (pid 813), c (pid 815)
/// jobs:     3 shared
/// etcd:     http://127.0.0.1:2379  healthy  etcd-1, raft leader, 3.4.23
///           http://127.0.0.1:2479  unavailable: connection refused
/// ```
package enum ClusterText {
    package static func block(_ info: ClusterInfo) -> String {
        var lines: [(String, String)] = []
        let role = info.role == "unavailable" ? "etcd unavailable" : info.role
        lines.append(("node", "\(info.node) (\(role))"))
        if let problem = info.problem { lines.append(("problem", problem)) }
        lines.append(("leader", info.leader ?? "none"))
        if let lease = info.lease {
            let left = info.lease_remaining.map { $0 > 0 ? ", " + StatsText.fixed($0, decimals: 1) + "s left" : ", not renewed in time (expired?)" } ?? ""
            lines.append(("lease", "\(lease), ttl \(info.lease_ttl)s\(left)"))
        } else {
            lines.append(("lease", "none (ttl \(info.lease_ttl)s)"))
        }
        let members = info.members.map { member in member.pid.map { "\(member.name) (pid \($0))" } ?? member.name }
        lines.append(("members", members.isEmpty ? "none known" : members.joined(separator: ", ")))
        lines.append(("jobs", "\(info.shared_jobs) shared, under \(info.prefix)"))
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

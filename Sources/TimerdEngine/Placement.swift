import TimerdCore

/// A live member of the cluster as etcd has it (`members/NODE`, `docs/cluster.md`).
package struct ClusterMember: Sendable, Equatable {
    package var name: String
    /// Its `[cluster] tags`, for jobs' `run_on`.
    package var tags: [String]
    /// The shared config jobs (`cluster = yes`) its config declares: only it can run those.
    package var configJobs: Set<String>

    package init(name: String, tags: [String] = [], configJobs: Set<String> = []) {
        self.name = name
        self.tags = tags
        self.configJobs = configJobs
    }
}

/// How this node sees the cluster: its role and the live members, with the last instant claimed for
/// each shared job (where a job's schedule goes on from on the node that takes it over).
package struct ClusterView: Sendable {
    package var role: ClusterRole
    package var members: [ClusterMember]
    package var claims: [JobName: WallTime]
    /// Why the view changed, for the log.
    package var reason: String

    package init(role: ClusterRole, members: [ClusterMember], claims: [JobName: WallTime] = [:], reason: String) {
        self.role = role
        self.members = members
        self.claims = claims
        self.reason = reason
    }
}

/// Which live member runs a shared job: rendezvous (highest random weight) hashing of the job's name
/// over the members that may take it (every tag of its `run_on`; for a config job, its config declares
/// it). Every node computes the same owner from the same members, and when a member joins or leaves,
/// only the jobs it wins or held move. The hash is FNV-1a over the member's and the job's names, then
/// SplitMix64's finaliser: fixed, so nodes of different builds agree (Swift's `Hasher` is seeded per
/// process).
package enum Placement {
    package static func weight(job: String, member: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in member.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        hash = (hash ^ 0xff) &* 0x0000_0100_0000_01b3  // no byte of UTF-8: "ab"+"c" differs from "a"+"bc"
        for byte in job.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        hash = (hash ^ (hash >> 30)) &* 0xbf58_476d_1ce4_e5b9
        hash = (hash ^ (hash >> 27)) &* 0x94d0_49bb_1331_11eb
        return hash ^ (hash >> 31)
    }

    /// Whether `member` may run the job: it carries every tag of `runOn`, and declares it if it is a
    /// config job.
    package static func mayRun(_ member: ClusterMember, job: String, runOn: [String], configJob: Bool) -> Bool {
        if configJob, !member.configJobs.contains(job) { return false }
        return runOn.allSatisfy { member.tags.contains($0) }
    }

    /// The member that runs the job, or nil when none may.
    package static func owner(of job: String, runOn: [String], configJob: Bool, among members: [ClusterMember]) -> String? {
        var best: (weight: UInt64, name: String)?
        for member in members where mayRun(member, job: job, runOn: runOn, configJob: configJob) {
            let weight = Self.weight(job: job, member: member.name)
            if best == nil || weight > best!.weight || (weight == best!.weight && member.name < best!.name) {
                best = (weight, member.name)
            }
        }
        return best?.name
    }
}

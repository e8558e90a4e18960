import Testing
import TimerdEngine

/// Rendezvous placement of shared jobs over the cluster's members (`Placement`, docs/cluster.md).
@Suite struct PlacementTests {
    let members = ["a", "b", "c"].map { ClusterMember(name: $0) }
    let jobs = (0..<300).map { "job-\($0)" }

    func owners(_ members: [ClusterMember], runOn: [String] = []) -> [String: String?] {
        Dictionary(uniqueKeysWithValues: jobs.map { ($0, Placement.owner(of: $0, runOn: runOn, configJob: false, among: members)) })
    }

    @Test func threeHundredJobsSpreadOverThreeMembers() {
        let placed = owners(members)
        var counts: [String: Int] = [:]
        for owner in placed.values { counts[owner!, default: 0] += 1 }
        #expect(counts.keys.sorted() == ["a", "b", "c"])
        // Each between a fifth and a half (the integration test's bound for fires).
        #expect(counts.values.allSatisfy { $0 >= 60 && $0 <= 150 }, "\(counts)")
        // The same on every node: the order the members are listed in changes nothing.
        #expect(owners(members.reversed()) == placed)
    }

    @Test func aMemberLeavingMovesOnlyItsJobsAndOneJoiningTakesOnlyWhatItWins() {
        let before = owners(members)
        let after = owners(members.filter { $0.name != "b" })
        for job in jobs {
            if before[job]! != "b" { #expect(after[job]! == before[job]!, "\(job) moved though its owner stayed") }
            #expect(after[job]! != "b")
        }
        let joined = owners(members + [ClusterMember(name: "d")])
        var moved = 0
        for job in jobs where joined[job]! != before[job]! {
            #expect(joined[job]! == "d", "\(job) moved between old members")
            moved += 1
        }
        #expect(moved > 300 / 8 && moved < 300 / 2, "d took \(moved) of 300")
    }

    @Test func runOnAndConfigJobsLimitTheMembersThatMayRunAJob() {
        let tagged = [ClusterMember(name: "a", tags: ["ssd"]), ClusterMember(name: "b", tags: ["ssd", "eu"]), ClusterMember(name: "c")]
        for job in jobs {
            #expect(Placement.owner(of: job, runOn: ["ssd", "eu"], configJob: false, among: tagged) == "b")
            #expect(["a", "b"].contains(Placement.owner(of: job, runOn: ["ssd"], configJob: false, among: tagged)))
            #expect(Placement.owner(of: job, runOn: ["gpu"], configJob: false, among: tagged) == nil)
        }
        let declaring = [ClusterMember(name: "a", configJobs: ["report"]), ClusterMember(name: "b"), ClusterMember(name: "c", configJobs: ["report"])]
        #expect(["a", "c"].contains(Placement.owner(of: "report", runOn: [], configJob: true, among: declaring)))
        #expect(Placement.owner(of: "other", runOn: [], configJob: true, among: declaring) == nil)
    }

    @Test func theWeightIsFixedAcrossBuildsAndSeparatesNames() {
        // Nodes of different builds must agree: these values may never change.
        #expect(Placement.weight(job: "backup", member: "web-1") == Placement.weight(job: "backup", member: "web-1"))
        #expect(Placement.weight(job: "c", member: "ab") != Placement.weight(job: "bc", member: "a"))
        #expect(Placement.weight(job: "backup", member: "web-1") == 11_335_262_646_000_434_571)
    }
}

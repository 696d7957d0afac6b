"""Queue placement: where would Volcano put the pods of pending VCJobs, and can an exact model do better?

**Pod facts.** Each replica of a VCJob task becomes a ``snapshot.Pod`` with ``node_name`` None, named
``<job>-<task>-<index>`` as Volcano's job controller names it, with the template's requests,
nodeSelector, required node affinity and tolerations, so the feasibility oracle (``oracle``) applies
as is.

**Gang.** A job is admitted when at least ``minAvailable`` of its pods are placed and, when the job's
minAvailable is not below the sum of its tasks' minimums (a task's ``minAvailable``, else its
replicas), every task has its minimum too: Volcano's ``JobInfo.CheckTaskReady``; and at least one pod
is placed. Replicas beyond that are placed when they fit. A job that is not admitted places nothing
(Volcano's Statement is discarded).

**Running gangs.** A replica whose pod ``<job>-<task>-<index>`` is in the snapshot bound to a node and
not terminal, or Succeeded (``held_pods``; a pod whose job-name label or owning PodGroup names another
job does not count) already counts for the gang, as Volcano's ``ReadyTaskNum`` counts it: only the
other replicas (absent, Pending without a node, Failed) are placed, and minAvailable and the tasks'
minimums count the running ones (``needed``). With a network topology, the job's regions (what the
exact model and the victims choose from, ``Context.regions``) are the HyperNodes that hold every node the
running pods are on — the lowest-tier one first, then its ancestors up to highestTierAllowed (hard) or up
to the top and then the whole cluster (soft); the greedy's allocate searches wider (Topology below). A
running gang whose running pods already make it ready is admitted only when one of its pending pods
fits. The running pods of a job being placed are not victims (``shield``), but those of a bare PodGroup that
cannot be ready without them, when another job's tiers offer them (the PodGroup then waits for good).

**Order** (Volcano's allocate with the capacity, priority and gang plugins). Queues by
``compare_queues``: higher ``spec.priority``, then the lower share (allocated / deserved, the largest
ratio over the resources the effective deserved lists; below two queues' lowest common ancestor the
shares of the subtrees' tops are compared), a queue with a deserved before a best-effort one, then the
name. Jobs in a queue by ``job_key_in_queue``: higher PriorityClass value, a gang not ready yet before
a ready one, in the greedy the smaller drf dominant share (its running and placed pods over the cluster's
allocatable; ``SchedulerConf.drf_job_order``), earlier creationTimestamp (none: last), namespace/name. A job's
pods by Volcano's TaskOrderFn (``jobs.gang_steps``): the pod's priority (the task template's priorityClassName,
else the job's), then the index its name ends in, creation, UID. The plan lists jobs in this order taken at the
snapshot (``job_order``); the greedy interleaves as allocate does.

**Queues.** For the job's queue and every ancestor, ``allocated + request ≤ realCapability`` on every
requested resource (the capacity plugin with hierarchy, ``queues.account_queues``), checked per pod as
it is placed. The queue must exist, be a leaf and be Open.

**Topology.** ``mode: hard``: every pod inside one HyperNode of tier ≤ ``highestTierAllowed`` (none
written: any tier, still one HyperNode). ``highestTierName`` names that tier by the HyperNodes'
``spec.tierName`` when ``highestTierAllowed`` is absent (Volcano's session translates it the same way;
``context.resolve_tier_names``, ``snapshot.resolve_tier_name``); a name no HyperNode carries, or one that
HyperNodes of two tiers carry, is bad input. ``mode: soft``: the same search over every HyperNode, then
the virtual root (the whole cluster): Volcano's session rewrites soft to hard with the limit one tier above
the highest HyperNode. No ``networkTopology``: the whole cluster, ``hyperNode`` and ``tier`` null. A plan
names the lowest region that holds all the job's pods, running ones too.

**Greedy** (Volcano's allocate, ``greedy_place``): pop the first queue (shares as the placements so
far leave them), pop its first job, give it one turn, push the job back while it has pods left and its
turn placed one, push the queue back. A job's first turn places its gang: candidate regions grouped by
tier ascending (a topology job: Volcano's HyperNode gradient, ``Greedy.turn_regions`` — with nothing of
the job allocated, every region whose nodes' free room at the session's start, summed, covers all its
pending pods, ``Greedy.prefilter_short``; with running pods, every region inside the search root, the
highest region within the limit that holds them, whether or not it holds them); each region is dry-run
in a Statement (tentative allocations, undone), pods tried in
the order above until the gang is ready (and at least one pod is placed), a pod that fits nowhere
skipped unless its task needs it; the lowest tier with any success wins, then the region with the
best HyperNode score (the network-topology-aware plugin's: over the HyperNode's summed resources as
they were before the dry run, plus every pod of the job, 0 when that overflows it; ``Greedy.region_score``),
then the name (Volcano: random among equals). Each later turn of an admitted job places one more pod (a
pod that fits nowhere is dropped), as allocate's turn of a ready job places one task: a topology job
searches again (``Greedy.extend_topology``: the regions inside its search root, lowest tier first, the
best score), so its region may widen up to the root; a job without topology, anywhere.
Within a dry run each pod goes to the node with the highest binpack score (``binpack_score``, Volcano's
formula with ``BinpackWeights``), ties to the first node by name (Volcano picks at random among equals), plus,
when the scheduler configuration names network-topology-aware, the plugin's node score: for a pod of a job
without topology the HyperNode binpack of the node's HyperNodes (``Greedy.hyper_score``, its normal-pod
fading and switch read from the configuration), for a topology job's pod the pull towards its pods so far
(``hyperscore.Fabric.bonus``: full in its allocated HyperNode, less the higher their lowest common HyperNode); and,
when a configuration file lists nodeorder, its least-requested and balanced-resource scores (``nodeorder``).
A partitioned job's HyperNodes are searched as a whole job's (the pre-filter with its first minAvailable
pods), its HyperNode scored by the sum of its partitions' scores; each partition as a sub-job inside it
(``partitions.partition_gradient``, ``Greedy.place_partition``). Where this simplifies: nodeorder's affinity,
taint, image and spread scores are left out; queue ties go to the name, job ties to
namespace/name (Volcano: creationTimestamp, then UID).

**Greedy victims** (Volcano's preempt action, then its reclaim action; rules in ``victims``). After
allocate, preempt for every job it did not admit, in job order, then reclaim for every job still not
placed, in job order — each on the state the jobs before it left (allocate's placements, and the
earlier victims gone: their room and their queue allocation are free for the jobs that follow). A job
that now fits without victims is placed there first (room an earlier job's victims freed beyond its
own need), whatever its preemptionPolicy. Preempt is never tried for a job with a networkTopology, its
own or one of its partitions' (Volcano's preempt skips it, ``victims.action_refused``). Each action:
regions in the order above, the first whose dry run readies the gang; in a dry run each pod, in Volcano's
task order (``jobs.preemptor_order``: the pod's priority, then the index its name ends in, creation, UID — one
queue of the job's pods, no sub-job step), goes where it fits as in allocate, else to the first node, in the
order below, whose
victims would all together make room (Volcano's ``ValidateVictims``), evicting them one by one in
victim order until the pod fits, the node's evictions undone when it still does not. When preempt finds no
victims for a job, or after it pipelined the job, its pass within the job follows (Volcano's "preemption
between tasks within a job"; a partitioned job's too when no partition has a topology): the job's pods one by
one on nodes where they fit, kept for the cycle (``evict.pipeline_within``), so that its reclaim only has to
place the rest.

*Node order for victims* (Volcano's ``preempt``: ``PredicateNodes``, ``PrioritizeNodes``, ``SortNodes``; its
``reclaim`` walks ``PredicateNodes``' list unscored, ``Greedy.reclaim_order``): every walk starts from
vc-scheduler's node list, which optplan takes by name (``nodeorder.node_list``: Volcano's is the informer's
initial list as a Go map hands it over, the names rotated at random, a fresh rotation each time vc-scheduler
starts, reordered further by parallel workers). Preempt: the region's nodes that pass the static predicates,
by the pod's binpack score on each node highest first — ``binpack_score`` with the run's ``BinpackWeights``,
on the node's free room as the dry run stands before this pod's evictions (so a node where a weighted
resource would overflow scores 0, and resources without a weight, GPUs by default, do not count) — plus, for
preempt and a job without a network topology, the network-topology-aware plugin's score
(``binpack.normal_pod_score``: per tier the binpack of the node's HyperNode, fading 0.8 a tier), plus, when a
configuration file lists nodeorder, its least-requested and balanced-resource scores on the same state
(``Greedy.order_score``: Volcano's preempt prioritizes with every node-order plugin, as allocate does) — ties by
node name. Where this departs from Volcano: (1) of nodeorder's scores only those two (Volcano adds node
affinity, taints, image locality, spread); (2) ties go to the name, where Volcano keeps its node
list's order (random, above); (3) a pod evicted earlier in the dry run counts as free room, where Volcano
still counts a releasing pod as used until it is gone (its score, not its fit: both use future idle room);
(4) a topology job's reclaim walks every node and leaves the job to a later cycle's allocate in Volcano, in
the greedy's cycles (``Greedy.victim_regions``) and so in the exact model's reference (the greedy's plan); the
exact model's own plans take such a job's victims where it lands (a plan Volcano's cycles allow, not
necessarily the one its walk finds); (5) the
evictions on a node that still leave the pod without room are undone, where Volcano keeps them in the
statement; (6) reclaim takes no victims for a queue's room (preempt does, ``Greedy.evict_for``).

*Volcano's plugin tiers* (``tiers``; the only victim rules): which pods of a node may go is the tiers' answer
for the pod (the first tier, priority ∩ gang ∩ conformance, decides when it offers any; else drf for preempt,
the capacity plugin for reclaim); a victim PodGroup loses single pods (the gang plugin never takes one below
minMember, the second tier may), never goes whole; victims go until the node has room (never for a queue's
realCapability);
each pod walks the nodes in the order above, a node with room taking it without evictions (Volcano's
preempt and reclaim place on the walk, not first where the pod fits); reclaim passes over a node with
no running pod of another reclaimable queue (room or not). The plugins also see the node's running pods
of other jobs being placed (``jobs.plugin_view``: they shape the answer, never go). The victims the tiers
offer go in Volcano's order (``tiers.victim_key``: across jobs of one queue lower priority, a ready gang,
then drf's larger dominant share first; then, as within a job, ``Candidate.order_key``: the higher pod
index, then the later start, then the larger UID first; across queues ``queueorder.victim_queue_key``).
Volcano's node order among equal scores (``PredicateNodes``' parallel workers) and the order in which the
plugins see a node's pods (a Go map) vary from run to run; here ties go to the name and pods come in
``Candidate.input_key`` order.

*Gang-aware actions* (``gangevict``; rules in ``gangrules`` and ``bundles``): when the scheduler configuration
lists gangpreempt or gangreclaim, each takes its turn among the evicting actions in the configuration's order:
every pending pod of the job is placed or none, inside a domain (the cluster, or a hard job's HyperNodes
widest first), after evicting whole bundles of victim pods (a victim job's safe surplus, or the pods that
break its gang) in the bundles' order until the domain's room covers the job. The exact model holds the bundle
rule too (``gang_cpsat``: bundles taken whole, safe before whole, free among the ranked order and the domains —
a relaxation the validator re-checks); it declines only a gangreclaim the capacity plugin decides
(``gangevict.exact_declines``).

**Cycles** (``cycles``). vc-scheduler runs its actions once per scheduling cycle: preempt and reclaim
evict and only pipeline the starving jobs' pods, the next cycle's allocate gives the freed room in queue
and job order. The greedy runs cycles (allocate, then the victims above, on the snapshot the cycle before
left) until one evicts nothing; the plan is the cluster then: per job the pods allocate placed over all
cycles, each victim under the job whose action evicted it — a job not admitted keeps the victims whose
room went to jobs before it (its reason says so), a job a later cycle's allocate placed away from its
earlier victims keeps them (the validator checks such victims as a waiting job's, on nodes one of its
pods could have gone to), and a job with a network topology whose reclaim walked every node waits for a
later cycle's allocate. The plan does not name where such a job's pods were pipelined; the validator asks
Volcano's plugin tiers on each of its victims' nodes for some of its pods there, as for a placed job's
victims (``validate._pipelined_violations``, lenient on which pods, their order, and the other waiting jobs'
pipelined pods the capacity plugin sees). Where the plan cannot say a cycle's outcome (a pod placed in an earlier cycle
becoming a victim, a job pipelined in the last cycle away from its earlier victims), the cycles stop at
the last one it can say.

**Exact** (``cpsat`` with ``victims_cpsat``): placements and victims of all jobs decided
jointly — a running pod may be evicted only for an admitted job that lands on its node and that the tiers
offer it to (the first tier; the second where the first offers the job nothing on that node, within static
bounds: ``model.drf_limit``, ``model.capacity_limit``), capacity per node is the free room plus what evictions
there
release, and the queue rules are checked on the state at each job's turn in the validator's replay. A
partitioned job takes victims as any job (beside its partitions; Volcano's walk for it has no sub-job step, so
the greedy's may take others), and an exposed pod (a starving bare PodGroup's, or a VCJob's that its controller
makes again, ``jobs.shield``) goes only while its job is not admitted (``model.VictimData.owner``: the model does
not place a made-again replica; the greedy's later cycles may, and ``auto`` keeps the better plan).
Lexicographic: most priority-weighted jobs admitted (weight ``max(priority, 0) + 1``; a job whose running pods
already make its gang ready has that weight, every other job that weight × (1 + the sum of the ready ones'), so
that a waiting job outweighs every ready one together: ``model.job_weights``), then least victim
cost, then lowest tier sum, then most replicas beyond the minimum, then fewest newly occupied nodes,
then best static binpack, then — only to break ties — the jobs admitted earlier in Volcano's order (the
order of the greedy's first turns, ``order_weights``). The greedy's plan with its victims is a solution
of that model and its hint, so the optimum is never worse: where the static bounds do not hold it (the
second tier on the state earlier victims leave, a job placed into room a later job's victims freed, victims
of a job a later cycle did not admit), ``cpsat`` builds the model again with the plan as its anchor
(``model.Anchor``: under one literal its victims, late jobs and their placements, the tier families not
asked; replayed by its steps where job order cannot say it; the victims an earlier cycle evicted away from
where a later cycle placed their job freed before that cycle's jobs, as the validator replays them): on the
generated family's seeds 0-44 (``tests/placement/test_placement_family.py``) the model holds the greedy's plan,
plainly or as its anchor; under gangpreempt and gangreclaim not where two jobs take bundles of one PodGroup
(``gang_cpsat``), and ``cpsat`` keeps the greedy's plan there. When the exact model admits no more weight
than the greedy, it also keeps to the plans no worse than the greedy's on victim cost and on tier sum
(the order alone could trade a higher tier for less cost), so its plan dominates the greedy's on both;
when it admits more, the admissions differ and nothing is compared (``cpsat``'s docstring,
also for what OPTIMAL then means). ``plan_key`` computes that order for any plan, so ``auto`` keeps the
better of the greedy and CP-SAT plans (the greedy's on a tie); the exact plan shows the greedy's victims
of a job (``greedyVictims``) where they differ.

Every plan passes ``validate_placement`` (an independent re-check) before ``plan_placement`` returns it;
``cpsat`` re-checks its own plan first and keeps the greedy's when the validator refuses it.

**Modules**, each importing only the ones below it (pyproject's import-linter contracts):

- ``place``: the dispatch by solver name (``plan_placement``, ``place_jobs``): greedy | cpsat | auto, each a
  ``core.planner.Planner`` on a ``Context`` (``GreedyPlacer``, ``cpsat.CpSatPlacer``, ``AutoPlacer``: the
  one ``core.planner.Auto``);
- ``pending``: which pending gangs wait by fragmentation (``pending_gangs``: each alone, one greedy turn,
  no victims), for ``optplan frag --pending``;
- ``cpsat``, ``victims_cpsat``, ``gang_cpsat`` (gangpreempt's and gangreclaim's bundles): the exact model
  (imported only when asked for); ``model``: its data and
  variable containers, and ``plan_key`` (the exact objective for any plan, what ``auto`` compares);
- ``cycles`` (``greedy_cycles``): the greedy's scheduling cycles, each ``allocate`` then ``evict``, and
  the plan they leave;
- ``allocate`` (``greedy_place``, ``explain_rejections``) and ``evict`` (``plan_victims``: preempt for
  every job, then reclaim; ``victim_notes``): Volcano's actions over all the jobs, each job's turn simulated by
  ``greedy.Greedy`` (one dry-run loop for allocate, preempt and reclaim);
- ``validate``: the validator (``placement_violations``) and ``check_inputs``; it imports no planner;
- ``context``: the job order, the planners' ``Context``, and the simulated cluster (``State``, changed
  through a ``Statement``, a plan put on it by ``replay``);
- ``queueorder``: the queues as the capacity plugin reads them (``QueueState``), their order
  (``compare_queues``) and the victims' queue order across queues (``victim_queue_key``), shared by the
  planners and the validator;
- ``partitions``: a task's ``partitionPolicy`` (partitions placed whole, each inside one HyperNode, and
  ``minPartitions``), the rules the planners and the validator share;
- ``hyperscore``: network-topology-aware's node scores on the greedy's state (``HyperScores``: a normal pod's
  HyperNode binpack tier by tier; ``Fabric``: the pull of a topology job's pod towards its allocated HyperNode);
- ``jobs``: the pod facts, gang minimums, held pods and regions; ``binpack``: the binpack score; ``nodeorder``:
  the nodeorder plugin's least-requested and balanced-resource scores;
  ``tiers``: which victims Volcano's plugin tiers offer on a node (priority, gang, conformance, then drf or
  capacity), read by the greedy, the validator and the exact model's pairs;
- ``victims``: who may be a victim and the capacity plugin's reclaim rules.
- ``gangevict``: Volcano's gangpreempt and gangreclaim for one starving job on the greedy's state
  (``gang_evict``), when the scheduler configuration lists them (``victim_actions``: the evicting actions in
  its order), and the domains the exact model reads too (``job_domains``); the exact model declines only a
  gangreclaim the capacity plugin decides (``exact_declines``: ``cpsat`` refuses it, ``auto`` keeps the greedy's
  plan, status FALLBACK);
- ``gangrules``: those actions' rules, shared by the greedy and the validator: candidates, the plugin tiers'
  filter, the domains (a hard job's HyperNodes widest first, else the cluster), the victim order and the bundle
  rule's check (``gang_victim_violations``);
- ``safety``: safe preemption's rules (PDBs, cooldown, grades, approval), off unless asked for;
  ``bundles``: the bundle rule of Volcano's gangpreempt and gangreclaim actions (safe and whole bundles of a
  victim job, ranked by local gain over global cost).
- ``throttle``: the large-job submission throttle (seed 002 §6.4.2): when a queue is in large-job waiting
  mode and a small submission waits at the platform (``should_hold``, over ``place``'s greedy); its rule
  functions are read by the replay's preempt window too.

Static predicates and room are the oracle's (``optplan.solvers.core.oracle``: ``Predicates``, ``Capacity``),
one table per run.
"""

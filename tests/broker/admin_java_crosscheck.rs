//! Our admin API and the Java `kafka-share-groups.sh` (ShareGroupCommand) must report the
//! same groups, members, assignments and start offsets for the same live group.

use crate::admin_support;
use crate::common;

use std::collections::BTreeMap;

use admin_support::{produce, share_group_command_async, table_rows, Member};

#[tokio::test]
async fn java_share_group_command_agrees() {
    let admin = common::admin().await;
    let cluster = admin.cluster().clone();
    let topic = common::new_topic(&admin, "adm-java", 3).await;
    let group = common::unique("adm-java-g");
    admin.set_share_auto_offset_reset(&group, "earliest").await.unwrap();
    for p in 0..3 {
        produce(&cluster, &topic, p, 4 + p as usize).await;
    }
    let mut a = Member::join(&cluster, &group, &[&topic]).await;
    a.consume_and_accept(&cluster, &topic, 4 + 5 + 6).await;
    let b = Member::join(&cluster, &group, &[&topic]).await;
    // Let the assignment settle across both members before comparing.
    a.beat(&cluster).await;
    let a_alive = a.keep_alive(cluster.clone());
    let b_alive = b.keep_alive(cluster.clone());
    // Settled: both members hold an assignment (it changes only when membership does).
    common::wait_for_members(&admin, &group, 2, std::time::Duration::from_secs(60)).await;

    // --list
    let out = share_group_command_async(&["--list"]).await;
    assert!(out.ok, "{}", out.stderr);
    assert!(out.stdout.lines().any(|l| l.trim() == group), "java --list: {}", out.stdout);
    assert!(admin.list_share_groups().await.unwrap().iter().any(|g| g.group_id == group));

    // --describe --members: same member ids, hosts, client ids, partition counts, assignments.
    let out = share_group_command_async(&["--describe", "--group", &group, "--members"]).await;
    assert!(out.ok, "{}", out.stderr);
    let d = admin.describe_share_group(&group).await.unwrap();
    let mut java: Vec<Vec<String>> = table_rows(&out.stdout, "GROUP");
    java.sort();
    let ours: Vec<Vec<String>> = d
        .members
        .iter()
        .map(|m| {
            let assignment = m
                .assignment
                .iter()
                .map(|(t, ps)| format!("{t}:{}", ps.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(",")))
                .collect::<Vec<_>>()
                .join(";");
            vec![
                group.clone(),
                m.member_id.clone(),
                m.client_host.clone(),
                m.client_id.clone(),
                m.partition_count().to_string(),
                assignment,
            ]
        })
        .collect();
    assert_eq!(d.members.len(), 2);
    // A member with no partitions prints an empty ASSIGNMENT column: compare what is there.
    let trim = |rows: Vec<Vec<String>>| -> Vec<Vec<String>> {
        rows.into_iter().map(|r| r.into_iter().filter(|c| !c.is_empty()).collect()).collect()
    };
    assert_eq!(trim(java), trim(ours), "java:\n{}", out.stdout);

    // --describe --offsets: same partitions and start offsets.
    let out = share_group_command_async(&["--describe", "--group", &group, "--offsets"]).await;
    assert!(out.ok, "{}", out.stderr);
    let java: BTreeMap<(String, i32), (String, String)> = table_rows(&out.stdout, "GROUP")
        .into_iter()
        // Kafka 4.1's tool has no LAG column; ours prints "-" there.
        .map(|r| ((r[1].clone(), r[2].parse().unwrap()), (r[3].clone(), r.get(4).cloned().unwrap_or("-".into()))))
        .collect();
    let o = admin.list_share_group_offsets(&group, None).await.unwrap();
    let ours: BTreeMap<(String, i32), (String, String)> = o
        .partitions
        .iter()
        .map(|(tp, r)| {
            let r = r.as_ref().unwrap();
            let s = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
            ((tp.topic.clone(), tp.partition), (s(r.start_offset), s(r.lag)))
        })
        .collect();
    assert_eq!(java.len(), 3, "java:\n{}", out.stdout);
    assert_eq!(java, ours, "java:\n{}", out.stdout);

    a_alive.stop().await.leave(&cluster).await;
    b_alive.stop().await.leave(&cluster).await;
    admin.delete_share_groups(&[&group]).await.unwrap().pop().unwrap().unwrap();
}

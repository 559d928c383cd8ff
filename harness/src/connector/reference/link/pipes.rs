//! A cluster session's pipelines: a plain connection per node, to the primary the slot map names
//! for a key's slot, since the cluster client's pipelines turn one error reply into an error for
//! the whole pipeline. On one engine, the session's own connection.

use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{ConnectionLike, ErrorKind as RedisKind, Pipeline, RedisResult, Value};

use super::{Link, MapFrom};
use crate::engine::admin::shards;

impl Link {
    /// The connection that pipelines commands on `key`'s slot: the one engine's, or a plain
    /// connection to the primary the slot map names (opened on first use).
    fn pipe_for(&mut self, key: &str) -> RedisResult<&mut redis::Connection> {
        match self {
            Self::One(c) => Ok(c),
            Self::Sentinel(p) => Ok(&mut p.con),
            Self::Cluster(c) => {
                let slot = shards::slot(key.as_bytes());
                let port = c
                    .slots
                    .iter()
                    .find(|(_, ranges, _)| shards::holds(ranges, slot))
                    .map(|(p, _, _)| *p)
                    .ok_or_else(|| {
                        redis::RedisError::from((
                            RedisKind::Client,
                            "no node serves the slot",
                            format!("slot {slot} of {key}"),
                        ))
                    })?;
                if !c.pipes.contains_key(&port) {
                    let con = c.dial.connection(&c.node_url(port)?, c.timeout)?;
                    c.pipes.insert(port, con);
                }
                let con = c.pipes.get_mut(&port).expect("inserted above");
                Ok(con)
            }
        }
    }

    /// On a cluster, the slot map read from `CLUSTER SHARDS`, its pipelines dialling the hosts
    /// `from` says, and `CLUSTER NODES` read too, as other client libraries read the slot map
    /// ([`super::super::Permits::every_slot_map`], P4.9; a double's `ip`); nothing on one engine.
    pub(in crate::connector::reference) fn read_other_slot_maps(
        &mut self,
        from: MapFrom,
    ) -> RedisResult<()> {
        if let Self::Cluster(c) = self {
            c.read_map_from(from)?;
            c.con.route_command(
                &redis::cmd("CLUSTER").arg("NODES").to_owned(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
            )?;
        }
        Ok(())
    }

    /// On a cluster, a plain connection to every primary now rather than on first use
    /// ([`super::super::Permits::eager_nodes`], P8.1); nothing on one engine.
    pub(in crate::connector::reference) fn open_every_node(&mut self) -> RedisResult<()> {
        if let Self::Cluster(c) = self {
            let primaries: Vec<u16> = c.slots.iter().map(|(p, _, _)| *p).collect();
            for port in primaries {
                if !c.pipes.contains_key(&port) {
                    let con = c.dial.connection(&c.node_url(port)?, c.timeout)?;
                    c.pipes.insert(port, con);
                }
            }
        }
        Ok(())
    }

    /// Forgets every pipeline connection after a failure on one: a late reply must never be read
    /// as the reply to a later command (R4.16).
    fn drop_pipes_on_error<T>(&mut self, r: RedisResult<T>) -> RedisResult<T> {
        if let Err(e) = &r {
            self.after_error(e);
            if let Self::Cluster(c) = self {
                c.pipes.clear();
            }
        }
        r
    }

    /// A pipeline of commands that all live on `key`'s node, in one write; the replies in
    /// order, server errors as [`Value::ServerError`] items.
    pub(in crate::connector::reference) fn pipeline(
        &mut self,
        key: &str,
        p: &Pipeline,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.packed(key, &p.get_packed_pipeline(), count)
    }

    /// Pre-encoded commands of `key`'s node, as [`Link::pipeline`].
    pub(in crate::connector::reference) fn packed(
        &mut self,
        key: &str,
        bytes: &[u8],
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let r = self
            .pipe_for(key)
            .and_then(|c| c.req_packed_commands(bytes, 0, count));
        let r = self.drop_pipes_on_error(r);
        if r.is_err() && matches!(self, Self::Cluster(c) if c.resend_pipelines) {
            // The double's ClusterPipeline re-send: every command again, on a new connection.
            let again = self
                .pipe_for(key)
                .and_then(|c| c.req_packed_commands(bytes, 0, count));
            return self.drop_pipes_on_error(again);
        }
        r
    }

    /// Writes pre-encoded commands of `key`'s node and reads nothing: their replies wait for
    /// [`Link::recv_packed`], so the nodes of a cluster work on their shares at once.
    pub(in crate::connector::reference) fn send_packed(
        &mut self,
        key: &str,
        bytes: &[u8],
    ) -> RedisResult<()> {
        let r = self
            .pipe_for(key)
            .and_then(|c| c.send_packed_command(bytes));
        self.drop_pipes_on_error(r)
    }

    /// The `count` replies to what [`Link::send_packed`] wrote on `key`'s node, in order, as
    /// [`Link::pipeline`] gives them.
    pub(in crate::connector::reference) fn recv_packed(
        &mut self,
        key: &str,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let r = self.pipe_for(key).and_then(|c| {
            let mut out = Vec::with_capacity(count);
            while out.len() < count {
                match c.recv_response()? {
                    Value::Push { .. } => {}
                    v => out.push(v),
                }
            }
            Ok(out)
        });
        self.drop_pipes_on_error(r)
    }

    /// A `MULTI`/`EXEC` transaction of `count` commands on `key`'s slot; errors inside as `Err`.
    pub(in crate::connector::reference) fn transaction(
        &mut self,
        key: &str,
        p: &Pipeline,
        count: usize,
    ) -> RedisResult<()> {
        let r = self
            .pipe_for(key)
            .and_then(|c| c.req_packed_commands(&p.get_packed_pipeline(), count + 1, 1));
        for v in self.drop_pipes_on_error(r)? {
            v.extract_error()?;
        }
        Ok(())
    }
}

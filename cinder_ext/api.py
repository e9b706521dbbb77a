# SPDX-License-Identifier: Apache-2.0
"""cinder-api extension: validate ``fcache:`` specs, publish the policy.

Cinder 29 has no plug-in point for extra-spec validation (no stevedore
namespace; ``cinder/api/schemas/types_extra_specs.py`` only checks the shape
of keys and values, and the per-key checks in
``cinder/api/contrib/types_extra_specs.py`` -- ``cacheable`` vs
``multiattach``, ``image_service:store_id`` -- are hard-coded).  What it does
have is its API extension mechanism: ``[DEFAULT] osapi_volume_extension`` (a
MultiStrOpt) names extension factories that cinder-api imports, and an
extension's ``ControllerExtension`` objects extend existing resources with
``@wsgi.extends`` methods.  A generator method runs *before* the core action
(and can refuse the request), a plain one *after* it (and can edit the
response).  This module is one such extension::

    [DEFAULT]
    osapi_volume_extension = cinder.api.contrib.standard_extensions
    osapi_volume_extension = cinder_ext.api.Fcache_volume_policy

It hooks:

``extra_specs`` create/update (``openstack volume type set --property``)
  and ``types`` create (``openstack volume type create --property``):
  every ``fcache:`` key is validated before anything is stored; a bad one
  is answered with 400 naming the key, the value and what is allowed.
``attachments`` create/update and the ``volumes`` action
  ``os-initialize_connection``: the volume type's policy is added to the
  ``connection_info`` in the response, the way nova-compute receives it
  (:mod:`cinder_ext.policy`); an attachment also records, in Cinder's
  database, the write policy its host caches with
  (:mod:`cinder_ext.writeback`).
``snapshots`` and ``group_snapshots`` create, ``volumes``
  create from a source volume, the ``volumes`` action
  ``os-volume_upload_image`` and the ``groups`` action ``create-from-src``:
  refused (400, naming the volume, its server and what to do) while a
  compute host may cache the volume with ``write_back``, since each reads
  the volume and would silently lack what the guest flushed into the
  host's cache (``doc/admin/operations.rst``, "Every server and volume action,
  per write policy").  ``POST /backups`` is guarded the same way by the
  WSGI filter :class:`BackupGuard` (why there: its docstring).
"""

import logging
import re

from oslo_config import cfg
from oslo_serialization import jsonutils
import webob

from cinder.api import extensions
from cinder.api.openstack import wsgi
from cinder import context as cinder_context
from cinder import exception as cinder_exception
from cinder import objects
from cinder.volume import api as volume_api
from cinder.volume import volume_types
from cinder.wsgi import common as base_wsgi

from cinder_ext import exception
from cinder_ext import extra_specs
from cinder_ext import policy
from cinder_ext import writeback

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

OPTS = [
    cfg.StrOpt('compute_default_write_policy',
               default='write_through',
               choices=extra_specs.WRITE_POLICIES,
               help='What nova.conf\'s [fcache] default_write_policy is on '
                    'the compute hosts: the write policy of a volume whose '
                    'type is cacheable but sets no fcache:write_policy.  '
                    'With write_back, cinder-api refuses to snapshot, back '
                    'up or clone such a volume while it is attached.  If '
                    'the compute hosts differ, set write_back.'),
]
CONF.register_opts(OPTS, group='fcache')


def _check(specs):
    """Validate the ``fcache:`` keys of ``specs`` or raise a 400."""
    if not isinstance(specs, dict):
        # Cinder's own schema rejects this shape; leave the message to it.
        return
    try:
        extra_specs.validate_specs(specs)
    except exception.InvalidExtraSpec as exc:
        LOG.info("Refused volume type extra spec: %s", exc)
        raise cinder_exception.InvalidInput(reason=str(exc))


def _type_specs(volume_id):
    """The extra specs of the volume's type.

    Read as admin: fcache: keys are not user-visible specs, but every
    user's attachment needs the policy.
    """
    ctxt = cinder_context.get_admin_context()
    volume = objects.Volume.get_by_id(ctxt, volume_id)
    if not volume.volume_type_id:
        return {}
    return volume_types.get_volume_type_extra_specs(volume.volume_type_id)


def _publish(data, volume_id):
    """Add the policy of ``volume_id``'s type to connection data ``data``."""
    if not isinstance(data, dict) or not volume_id:
        return
    try:
        policy.add_to_connection_data(data, _type_specs(volume_id))
    except exception.InvalidExtraSpec as exc:
        # Stored before validation existed, or edited in the database: the
        # attach must not go ahead with a policy nobody asked for.
        raise cinder_exception.InvalidVolumeType(
            reason='volume %s: %s; fix it with openstack volume type set '
                   '--property' % (volume_id, exc))


def _active_policies(volume, specs=None, skip=None):
    """(attachment, write policy) of each attachment a host may cache."""
    found = []
    for att in volume.volume_attachment or ():
        if att.id == skip or not writeback.is_active(att.attach_status):
            continue
        if specs is None:
            specs = (volume_types.get_volume_type_extra_specs(
                volume.volume_type_id) if volume.volume_type_id else {})
        found.append((att, writeback.attachment_policy(att.connection_info,
                                                       specs)))
    return found


def _record_host_policy(attachment_id, volume_id, connection_info):
    """Record in the attachment the write policy its host caches with.

    What Cinder handed out, unless the volume is already cached by an
    attachment that stays active meanwhile: the destination of a live
    migration takes the source agent's write policy, and a swap (the
    new volume of a retype or migration of an in-use volume, whose
    ``migration_status`` is ``target:<old id>``) keeps the agent's volume
    as it was attached.
    """
    handed = writeback.handed_policy(connection_info)
    if not attachment_id or not volume_id:
        return
    ctxt = cinder_context.get_admin_context()
    volume = objects.Volume.get_by_id(ctxt, volume_id)
    record = handed
    if handed is not None:
        cached = [p for _a, p in _active_policies(volume, skip=attachment_id)]
        source = volume.migration_status or ''
        if source.startswith('target:'):
            try:
                old = objects.Volume.get_by_id(ctxt, source[len('target:'):])
            except cinder_exception.VolumeNotFound:
                old = None
            if old is not None:
                cached += [p for _a, p in _active_policies(old)]
        record = writeback.riskier(handed, *cached)
    attachment = objects.VolumeAttachment.get_by_id(ctxt, attachment_id)
    info = dict(attachment.connection_info or {})
    if info.get(writeback.HOST_POLICY_KEY, 'unset') == record:
        return
    info[writeback.HOST_POLICY_KEY] = record
    attachment.connection_info = info
    attachment.save()
    if record != handed:
        LOG.info("Attachment %(att)s of volume %(vol)s: the host keeps "
                 "caching it with write policy %(rec)s (handed %(handed)s)",
                 {'att': attachment_id, 'vol': volume_id, 'rec': record,
                  'handed': handed})


# What each guarded action does with the volume, for the refusal.
SNAPSHOT = 'snapshot'
BACKUP = 'back up'
CLONE = 'clone'
UPLOAD = 'upload to an image'
GROUP_SNAPSHOT = 'snapshot the group holding'
GROUP_CLONE = 'clone the group holding'
# Actions that end an attachment in Cinder's database without the host
# (Nova's detach writes the cache back first; these do not).
FORCE_DETACH = 'force-detach'
RESET_DETACHED = 'reset the attach status of'


def _holder(req, attachment):
    """The server, and its host as the caller may be told it."""
    ctxt = req.environ['cinder.context']
    # Cinder shows the compute host of an attachment to admins and
    # services only (cinder/api/v3/views/volumes.py); so do we.
    if ctxt.is_admin or 'service' in (ctxt.roles or ()):
        where = 'on host %s ' % (attachment.attached_host or '(unknown)')
    else:
        where = ''
    return attachment.instance_uuid or '(no server recorded)', where


def _refused_because(req, action, volume, attachment, resolved_from):
    """What every refusal starts with: who caches the volume, and how."""
    server, where = _holder(req, attachment)
    return server, (
        'fcache: will not %(action)s volume %(vol)s now: it is attached to '
        'server %(server)s %(where)s(attachment %(att)s) with the '
        'write_back cache policy (%(why)s), so that host\'s cache may hold '
        'writes the server has flushed that the volume does not have '
        'yet' % {'action': action, 'vol': volume.id, 'server': server,
                 'where': where, 'att': attachment.id,
                 'why': resolved_from})


def _refusal(req, action, volume, attachment, resolved_from):
    server, head = _refused_because(req, action, volume, attachment,
                                    resolved_from)
    return head + (
        ', and what Cinder reads would silently lack them.  Detach it first '
        '(openstack server remove volume %(server)s %(vol)s): the detach '
        'writes every cached write back to the volume, then retry.  '
        'Retyping it while attached does not help: the host keeps the '
        'policy it attached with until the volume is detached.  A volume '
        'that must be snapshotted, backed up or cloned while in use '
        'needs a write_through or read_only type when it is attached.' % {
            'vol': volume.id, 'server': server})


def _detach_refusal(req, action, volume, attachment, resolved_from):
    server, head = _refused_because(req, action, volume, attachment,
                                    resolved_from)
    return head + (
        '.  Marked detached here, the volume would be attached elsewhere, '
        'snapshotted or cloned without them, and the host could no longer '
        'write them back.  Detach it through Nova (openstack server remove '
        'volume %(server)s %(vol)s), which writes them back first.  If '
        'that host is gone for good, what only its cache held is lost: '
        'delete the attachment (openstack volume attachment delete '
        '%(att)s) to accept that.' % {
            'vol': volume.id, 'server': server, 'att': attachment.id})


def _refuse_if_write_back(req, volume_id, action, refusal=_refusal,
                          attachment_id=None):
    """Raise a 400 if a host may cache ``volume_id`` with write_back.

    Runs before Cinder's own checks and JSON-schema validation: a request
    whose volume cannot be found or seen is left to Cinder to answer.

    :param attachment_id: only this attachment counts (a force-detach of
        one attachment).
    """
    if not isinstance(volume_id, str) or not volume_id:
        return
    ctxt = req.environ['cinder.context']
    try:
        volume = volume_api.API().get(ctxt, volume_id)
    except cinder_exception.CinderException:
        return
    default = CONF.fcache.compute_default_write_policy
    for attachment, found in _active_policies(volume):
        if writeback.resolve(found, default) != writeback.WRITE_BACK:
            continue
        if attachment_id and attachment.id != attachment_id:
            continue
        if found == writeback.COMPUTE_DEFAULT:
            why = ('its type sets no fcache:write_policy and cinder.conf '
                   '[fcache] compute_default_write_policy is write_back')
        elif writeback.HOST_POLICY_KEY in (attachment.connection_info or {}):
            why = 'the policy its host caches it with'
        else:
            # Attached before attachments recorded it.
            why = "its volume type's fcache:write_policy"
        msg = refusal(req, action, volume, attachment, why)
        LOG.info("Refused: %s", msg)
        raise cinder_exception.InvalidVolume(reason=msg)


def _section(body, key):
    """``body[key]`` if both are dicts, else an empty dict."""
    if not isinstance(body, dict):
        return {}
    part = body.get(key)
    return part if isinstance(part, dict) else {}


def _group_volumes(req, group_id):
    """The ids of the volumes of a group the caller may see."""
    if not isinstance(group_id, str) or not group_id:
        return []
    ctxt = req.environ['cinder.context']
    try:
        group = objects.Group.get_by_id(ctxt, group_id)
        return [v.id for v in group.volumes]
    except cinder_exception.CinderException:
        return []


class SnapshotsController(wsgi.Controller):
    """Pre-processing of ``POST /snapshots`` (with or without force)."""

    @wsgi.extends
    def create(self, req, body):
        _refuse_if_write_back(req, _section(body, 'snapshot').get(
            'volume_id'), SNAPSHOT)
        yield


def _guard_backup(req, body):
    backup = _section(body, 'backup')
    # A backup of a snapshot reads the snapshot, which was taken (or
    # refused) under the same rule.
    if not backup.get('snapshot_id'):
        _refuse_if_write_back(req, backup.get('volume_id'), BACKUP)


class BackupGuard(base_wsgi.Middleware):
    """WSGI filter refusing ``POST /backups`` of a write_back volume.

    Not a controller extension like the rest: Cinder 29's v3 router
    serves ``/backups`` with the core controller it registers first, then
    the standard extension ``Backups`` registers its own resource under
    the same name, and controller extensions attach to that one, whose
    routes never match.  So this filter goes into cinder-api's
    ``api-paste.ini`` pipeline, after ``keystonecontext`` (it needs the
    request's context to see only what the caller may see)::

        [filter:fcache_guard]
        paste.filter_factory = cinder_ext.api:BackupGuard.factory
    """

    # /v3 is stripped by the URL map; the project id is optional (3.67).
    _CREATE = re.compile(r'^(/[^/]+)?/backups/?$')

    def process_request(self, req):
        if req.method != 'POST' or not self._CREATE.match(req.path_info):
            return None
        if 'cinder.context' not in req.environ:
            LOG.warning("fcache BackupGuard runs before cinder-api has a "
                        "request context; put it after keystonecontext "
                        "(or noauth) in api-paste.ini.  Backups are not "
                        "guarded")
            return None
        try:
            body = jsonutils.loads(req.body)
        except ValueError:
            # Cinder answers malformed bodies itself.
            return None
        try:
            _guard_backup(req, body)
        except cinder_exception.InvalidVolume as exc:
            return wsgi.Fault(webob.exc.HTTPBadRequest(explanation=exc.msg))
        return None


class GroupSnapshotsController(wsgi.Controller):
    """Pre-processing of ``POST /group_snapshots``."""

    @wsgi.extends
    def create(self, req, body):
        group_id = _section(body, 'group_snapshot').get('group_id')
        for volume_id in _group_volumes(req, group_id):
            _refuse_if_write_back(req, volume_id, GROUP_SNAPSHOT)
        yield


class GroupsController(wsgi.Controller):
    """Pre-processing of the ``groups`` action ``create-from-src``."""

    @wsgi.extends(action='create-from-src')
    def create_from_src(self, req, body):
        source = _section(body, 'create-from-src').get('source_group_id')
        for volume_id in _group_volumes(req, source):
            _refuse_if_write_back(req, volume_id, GROUP_CLONE)
        yield


class VolumesController(wsgi.Controller):
    """Pre-processing of volume clones and image uploads.

    ``POST /volumes`` with ``source_volid``, and the action
    ``os-volume_upload_image`` (``--force`` for an in-use volume).
    """

    @wsgi.extends
    def create(self, req, body):
        _refuse_if_write_back(req, _section(body, 'volume').get(
            'source_volid'), CLONE)
        yield

    @wsgi.extends(action='os-volume_upload_image')
    def upload_image(self, req, id, body):
        _refuse_if_write_back(req, id, UPLOAD)
        yield


class ExtraSpecsController(wsgi.Controller):
    """Pre-processing of ``/types/{type_id}/extra_specs``."""

    @wsgi.extends
    def create(self, req, type_id, body):
        _check(body.get('extra_specs') if isinstance(body, dict) else None)
        yield

    @wsgi.extends
    def update(self, req, type_id, id, body):
        _check(body)
        yield


class TypesController(wsgi.Controller):
    """Pre-processing of ``POST /types`` (type created with specs)."""

    @wsgi.extends(action='create')
    def create(self, req, body):
        vtype = body.get('volume_type') if isinstance(body, dict) else None
        if isinstance(vtype, dict):
            _check(vtype.get('extra_specs'))
        yield


class AttachmentsController(wsgi.Controller):
    """Post-processing of the attachments API (Nova's path since 3.44)."""

    def _publish(self, resp_obj):
        attachment = (resp_obj.obj or {}).get('attachment') or {}
        info = attachment.get('connection_info')
        _publish(info, attachment.get('volume_id'))
        # Without a connection (no connector yet) no host caches it.
        if not isinstance(info, dict) or not info:
            return
        try:
            _record_host_policy(attachment.get('id'),
                                attachment.get('volume_id'), info)
        except cinder_exception.CinderException:
            # The attach itself is done: failing its answer now would
            # leave Nova rolling back a connection the back-end made.
            # Without the record the volume's type decides.
            LOG.exception("Could not record the write policy of "
                          "attachment %s; snapshots, backups and clones "
                          "of volume %s are checked against its type",
                          attachment.get('id'), attachment.get('volume_id'))

    @wsgi.extends
    def create(self, req, resp_obj, body):
        self._publish(resp_obj)

    @wsgi.extends
    def update(self, req, resp_obj, id, body):
        self._publish(resp_obj)


class VolumeActionsController(wsgi.Controller):
    """Volume actions: the legacy ``os-initialize_connection``.

    Post-processing of ``os-initialize_connection``; pre-processing of the
    admin actions that mark a volume detached without its host.
    """

    @wsgi.extends(action='os-force_detach')
    def force_detach(self, req, id, body):
        attachment_id = _section(body, 'os-force_detach').get(
            'attachment_id')
        _refuse_if_write_back(
            req, id, FORCE_DETACH, refusal=_detach_refusal,
            attachment_id=attachment_id if isinstance(
                attachment_id, str) else None)
        yield

    @wsgi.extends(action='os-reset_status')
    def reset_status(self, req, id, body):
        # Only a reset that lets the volume go: its status to anything but
        # in-use, or its attach status to detached.
        asked = _section(body, 'os-reset_status')
        status = asked.get('status')
        if asked.get('attach_status') == 'detached' or (
                status is not None and status != 'in-use'):
            _refuse_if_write_back(req, id, RESET_DETACHED,
                                  refusal=_detach_refusal)
        yield

    @wsgi.extends(action='os-initialize_connection')
    def initialize_connection(self, req, resp_obj, id, body):
        info = (resp_obj.obj or {}).get('connection_info') or {}
        _publish(info.get('data'), id)


class Fcache_volume_policy(extensions.ExtensionDescriptor):
    """fcache: specs validated, policy published, write_back guarded.

    Validates fcache: extra specs; adds the policy to connection_info;
    refuses reads of a volume a host may cache with write_back.
    """

    name = 'FcacheVolumePolicy'
    alias = 'fcache-volume-policy'
    updated = '2026-11-21T00:00:00+00:00'

    def get_controller_extensions(self):
        return [
            extensions.ControllerExtension(self, 'extra_specs',
                                           ExtraSpecsController()),
            extensions.ControllerExtension(self, 'types', TypesController()),
            extensions.ControllerExtension(self, 'attachments',
                                           AttachmentsController()),
            extensions.ControllerExtension(self, 'volumes',
                                           VolumeActionsController()),
            extensions.ControllerExtension(self, 'volumes',
                                           VolumesController()),
            extensions.ControllerExtension(self, 'snapshots',
                                           SnapshotsController()),
            extensions.ControllerExtension(self, 'group_snapshots',
                                           GroupSnapshotsController()),
            extensions.ControllerExtension(self, 'groups',
                                           GroupsController()),
        ]

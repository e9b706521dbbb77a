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
  (:mod:`cinder_ext.policy`).
"""

import logging

from cinder.api import extensions
from cinder.api.openstack import wsgi
from cinder import context as cinder_context
from cinder import exception as cinder_exception
from cinder import objects
from cinder.volume import volume_types

from cinder_ext import exception
from cinder_ext import extra_specs
from cinder_ext import policy

LOG = logging.getLogger(__name__)


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
        _publish(attachment.get('connection_info'),
                 attachment.get('volume_id'))

    @wsgi.extends
    def create(self, req, resp_obj, body):
        self._publish(resp_obj)

    @wsgi.extends
    def update(self, req, resp_obj, id, body):
        self._publish(resp_obj)


class VolumeActionsController(wsgi.Controller):
    """Post-processing of the legacy ``os-initialize_connection`` action."""

    @wsgi.extends(action='os-initialize_connection')
    def initialize_connection(self, req, resp_obj, id, body):
        info = (resp_obj.obj or {}).get('connection_info') or {}
        _publish(info.get('data'), id)


class Fcache_volume_policy(extensions.ExtensionDescriptor):
    """Validates fcache: extra specs; adds the policy to connection_info."""

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
        ]
